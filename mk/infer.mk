# Inference benchmark: the C API against onnxruntime on the exported file (bench/infer.sh);
# not part of make test.
BENCH_INFER_BIN := $(BUILD)/bench/bench_infer

$(BENCH_INFER_BIN): bench/bench_infer.c $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $< $(STATIC) -o $@ $(LDFLAGS_ALL) $(LDLIBS_ALL)

.PHONY: bench-infer
bench-infer: $(BENCH_INFER_BIN) tools
	$(Q)bench/infer.sh $(BENCH_INFER_BIN) $(BIN)
