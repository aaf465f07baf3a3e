# CPU training-step benchmark against PyTorch (bench/run.sh); not part of `make test`.
BENCH_BIN := $(BUILD)/bench/bench_train

$(BENCH_BIN): bench/bench_train.c $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $< $(STATIC) -o $@ $(LDFLAGS_ALL) $(LDLIBS_ALL)

bench: $(BENCH_BIN)
	$(Q)bench/run.sh $(BENCH_BIN)

# The same steps quiet, beside a one-core hog, and with --threads 4 (bench/load.sh).
bench-load: $(BENCH_BIN)
	$(Q)bench/load.sh $(BENCH_BIN)
