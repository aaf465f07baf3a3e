# make run — the README's first command: installs the build dependencies and the
# Fashion-MNIST package when missing (tools/install-deps.sh --data), builds the library and
# tools, trains configs/fashion_cnn.yaml on the best device present (a GPU when this build
# has CUDA and one is usable, else every CPU core) into $(RUN_DIR), and prints the test
# accuracy of the final weights.
RUN_DIR ?= runs/fashion_cnn

run:
	$(Q)tools/install-deps.sh --data
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(BIN)/tfc-train configs/fashion_cnn.yaml --out $(RUN_DIR)
	$(Q)$(BIN)/tfc-test $(RUN_DIR)/config.yaml --weights $(RUN_DIR)/final.safetensors
