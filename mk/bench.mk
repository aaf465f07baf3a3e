# CPU training-step benchmark against PyTorch (bench/run.sh); not part of `make test`.
BENCH_BIN := $(BUILD)/bench/bench_train

$(BENCH_BIN): bench/bench_train.c $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $< $(STATIC) -o $@ $(LDFLAGS_ALL) $(LDLIBS_ALL)

# Then fortunes_bigru's step on bucketed batches against batches padded to 80
# (bench/bucketing.sh; trains the two for a few hundred steps with the tools).
bench: $(BENCH_BIN) tools
	$(Q)bench/run.sh $(BENCH_BIN)
	$(Q)bench/bucketing.sh $(BIN)

# The same steps quiet, beside a one-core hog, and with --threads 4 (bench/load.sh).
bench-load: $(BENCH_BIN)
	$(Q)bench/load.sh $(BENCH_BIN)

# tfc against PyTorch, Keras on TensorFlow and Keras on JAX from venvs under build/peers/
# (installed from PyPI on first use; not in CI; bench/peers.sh).
bench-peers: $(BENCH_BIN)
	$(Q)bench/peers.sh $(BENCH_BIN)

# Data-parallel CPU benchmark: 2 ranks x 1 thread against 1 process x 2 threads (bench/dist.sh).
bench-dist: all
	$(Q)bench/dist.sh $(BIN)

# Data-parallel training between two network namespaces of this machine over Open MPI's TCP
# transport (tests/netns.sh): needs root and iproute2; not in make test (CI's containers may
# not allow network namespaces).
.PHONY: test-netns
test-netns: tools
	$(Q)tests/netns.sh $(BIN) $(BUILD)/netns

# Convolution ops: tfc's CPU backend against oneDNN's primitives, layer by layer (bench/bench_conv.c;
# the oneDNN evaluation in docs/cpu.md). Needs Debian's libdnnl-dev; not part of `make test`.
BENCH_CONV_BIN := $(BUILD)/bench/bench_conv

$(BENCH_CONV_BIN): bench/bench_conv.c $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $< $(STATIC) -o $@ $(LDFLAGS_ALL) $(LDLIBS_ALL)

bench-conv: $(BENCH_CONV_BIN)
	$(Q)env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 $(BENCH_CONV_BIN) $(BENCH_CONV_ARGS)
