# CPU training-step benchmark against PyTorch (bench/run.sh); not part of `make test`.
BENCH_BIN := $(BUILD)/bench/bench_train

$(BENCH_BIN): bench/bench_train.c $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $< $(STATIC) -o $@ $(LDFLAGS_ALL) $(LDLIBS_ALL)

bench: $(BENCH_BIN)
	$(Q)bench/run.sh $(BENCH_BIN)

# Data-parallel CPU benchmark: 2 ranks x 1 thread against 1 process x 2 threads (bench/dist.sh).
bench-dist: all
	$(Q)bench/dist.sh $(BIN)
