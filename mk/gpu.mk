# GPU checks and benchmarks; none is part of `make test` (docs/gpu.md).
#   make test-gpu          every op on CPU and GPU, compared (tests/gpu/test_gpu_ops.c); prints
#                          "skipped" and exits 0 when there is no usable GPU (or no CUDA build);
#                          then fashion_cnn's loss curve on GPU vs CPU and snapshots resumed
#                          across devices (tests/gpu/train_curve.sh; needs Fashion-MNIST); then
#                          the nccl engine with one rank and two ranks sharing the GPU through
#                          the mpi engine against one process (tests/gpu/dist.sh).
#                          TEST_GPU_ARGS=--cpu-twin checks the harness against a second CPU
#                          backend; TEST_GPU_ARGS=conv runs one test.
#   make test-gpu-memcheck the same under compute-sanitizer (memcheck, then racecheck on a
#                          short run).
#   make bench-gpu         training-step time (replayed from a CUDA graph; TFC_FLAGS= launched)
#                          and peak memory of tfc on the GPU next to PyTorch
#                          eager on CUDA: mnist_mlp, mnist_cnn, char_lstm, resnet20
#                          (bench/bench_gpu.sh; STEPS=N for shorter runs), with torch.compile
#                          (default, reduce-overhead) and JAX jit in float32 (PEER_STEPS=N);
#                          then tfc-train's step with TFC_COMM=nccl and one rank against no engine
#                          (bench/comm_overhead.sh; issue 12's <= 3%), with NCCL in the build.
GPU_TEST_BIN := $(BUILD)/tests/gpu/test_gpu_ops

# Objects whose code depends on TFC_HAVE_CUDA are rebuilt when a build directory switches
# between CUDA and CPU-only: $(BUILD)/cuda.flags changes (only) when HAVE_CUDA does.
CUDA_FLAGS_FILE := $(BUILD)/cuda.flags
$(shell mkdir -p $(BUILD) && (echo '$(HAVE_CUDA)' | cmp -s - $(CUDA_FLAGS_FILE) || echo '$(HAVE_CUDA)' > $(CUDA_FLAGS_FILE)))
$(BUILD)/src/device/device.o $(BUILD)/bench/bench_train $(GPU_TEST_BIN): $(CUDA_FLAGS_FILE)
GPU_SANITIZER ?= $(or $(wildcard $(CUDA_HOME)/bin/compute-sanitizer),compute-sanitizer)

$(GPU_TEST_BIN): tests/gpu/test_gpu_ops.c $(TEST_LIB) $(STATIC)
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	$(Q)$(CC) $(CPPFLAGS_ALL) -Itests -Itests/util $(CFLAGS_ALL) $< $(TEST_LIB) $(STATIC) -o $@ \
	    $(LDFLAGS_ALL) $(LDLIBS_ALL) -lcunit

test-gpu: features $(GPU_TEST_BIN) tools
	$(Q)OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(GPU_TEST_BIN) $(TEST_GPU_ARGS)
	$(Q)$(if $(TEST_GPU_ARGS),:,tests/gpu/train_curve.sh $(BIN) $(BUILD)/train-curve)
	$(Q)$(if $(TEST_GPU_ARGS),:,HAVE_NCCL=$(HAVE_NCCL) tests/gpu/dist.sh $(BIN) $(BUILD)/gpu-dist)

test-gpu-memcheck: features $(GPU_TEST_BIN)
	$(Q)$(GPU_SANITIZER) --tool memcheck --leak-check full --error-exitcode 1 $(GPU_TEST_BIN) $(TEST_GPU_ARGS)
	$(Q)$(GPU_SANITIZER) --tool racecheck --error-exitcode 1 $(GPU_TEST_BIN) train_cnn

# cuDNN's convolutions on resnet20's and mnist_cnn's shapes, NHWC against NCHW, heuristic
# against measured algorithms (bench/bench_cudnn.c; tools/gpu-bare.sh conv-layout). Needs a
# CUDA build.
BENCH_CUDNN_BIN := $(BUILD)/bench/bench_cudnn
$(BENCH_CUDNN_BIN): bench/bench_cudnn.c $(CUDA_FLAGS_FILE)
	@mkdir -p $(dir $@)
	@echo "  LINK  $@"
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $< -o $@ $(LDFLAGS_ALL) $(LDLIBS_ALL)

bench-gpu: features $(BENCH_BIN) tools
	$(Q)bench/bench_gpu.sh $(BENCH_BIN)
	$(Q)$(if $(filter 1,$(HAVE_NCCL)),bench/comm_overhead.sh $(BIN) $(BUILD)/bench-comm,echo "bench-gpu: this build has no NCCL: its one-rank overhead is not measured")
