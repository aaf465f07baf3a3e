# make run — the README's first command: installs the build dependencies and the
# Fashion-MNIST package when missing (tools/install-deps.sh --data), builds the library and
# tools, trains configs/fashion_cnn.yaml on the best device present (a GPU when this build
# has CUDA and one is usable, else every CPU core) into $(RUN_DIR), and prints the test
# accuracy of the final weights. Run again, it is repeatable: a finished run is only
# re-tested, an interrupted one resumes from its latest snapshot, and one stopped before its
# first snapshot starts over. RUN_CONFIG and RUN_DIR name another solver and run folder;
# RUN_SETUP=0 skips the installing and the build (a tree already built: test_trust's
# make_run walks the three cases that way on synthetic data).
RUN_DIR ?= runs/fashion_cnn
RUN_CONFIG ?= configs/fashion_cnn.yaml
RUN_SETUP ?= 1

run:
ifneq ($(RUN_SETUP),0)
	$(Q)tools/install-deps.sh --data
	$(Q)$(MAKE) --no-print-directory all
endif
	$(Q)last=$$(ls $(RUN_DIR)/snapshots/*.state 2>/dev/null | sort -V | tail -n 1); \
	if [ -f $(RUN_DIR)/final.safetensors ]; then \
	    echo "$(RUN_DIR) has finished (make run RUN_DIR=DIR trains anew elsewhere)"; \
	elif [ -n "$$last" ]; then \
	    echo "resuming $(RUN_DIR) from $$last"; \
	    $(BIN)/tfc-train $(RUN_CONFIG) --out $(RUN_DIR) --resume "$$last"; \
	elif [ -d $(RUN_DIR) ]; then \
	    echo "$(RUN_DIR) stopped before its first snapshot: starting over"; \
	    $(BIN)/tfc-train $(RUN_CONFIG) --out $(RUN_DIR) --overwrite; \
	else \
	    $(BIN)/tfc-train $(RUN_CONFIG) --out $(RUN_DIR); \
	fi
	$(Q)$(BIN)/tfc-test $(RUN_DIR)/config.yaml --weights $(RUN_DIR)/final.safetensors
