# Input-pipeline benchmark (bench/bench_data.c); not part of `make test`. Needs the
# dataset-fashion-mnist package. CNN_MS=<ms per CNN training step> adds the input/CNN ratio.
BENCH_DATA_BIN := $(BUILD)/bench/bench_data

$(BENCH_DATA_BIN): bench/bench_data.c $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $< $(STATIC) -o $@ $(LDFLAGS_ALL) $(LDLIBS_ALL)

bench-data: $(BENCH_DATA_BIN)
	$(Q)OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BENCH_DATA_BIN) $(if $(CNN_MS),--cnn-ms $(CNN_MS))
