# The model zoo and grid search (issue 6; docs in README.md "Grid search" / "Model zoo").
#   tfc-zoo hashes weights with nettle's SHA-256 (Debian nettle-dev, in tools/install-deps.sh).
#   make zoo-test   re-evaluates every model_zoo/<name>/ on its test split (needs the
#                   Fashion-MNIST and fortunes packages: tools/install-deps.sh --data) and
#                   fails when one is worse than its README says. Not part of `make test`,
#                   which only verifies every model's SHA-256 (tests/test_zoo.c).
.PHONY: zoo-test

$(BIN)/tfc-zoo: LDLIBS_ALL += -lnettle

zoo-test: $(BIN)/tfc-zoo
	$(Q)status=0; for d in model_zoo/*/README.md; do \
	    [ -f "$$d" ] || continue; n=$${d#model_zoo/}; n=$${n%/README.md}; \
	    echo "== $$n"; TFC_ZOO=$(CURDIR)/model_zoo $(BIN)/tfc-zoo test "$$n" || status=1; \
	done; exit $$status

# make zoo-retrain: retrains fashion_mlp, fortunes_classify, fortunes_bigru,
# fortunes_conv_bigru and fortunes_encoder with the command and threads their README records
# and fails unless the final test metric equals the README's exactly (tools/zoo-retrain.sh;
# needs tools/install-deps.sh --data; minutes, not in make test).
.PHONY: zoo-retrain
zoo-retrain: tools
	$(Q)tools/zoo-retrain.sh $(BIN) $(BUILD)/zoo-retrain

# make ref-zoo: the reverse Keras check (SPEC §5): a Keras 3 model built from each
# model_zoo/<name>/model.yaml loads its safetensors by name and predicts what tfc-predict
# does on records of its test split (tests/ref/keras_zoo_reverse.py), and the YAML-built
# Keras models of the committed fixtures reproduce them (keras_fixtures_reverse.py). Needs a
# Python with keras, jax, keras-hub, pyyaml and safetensors, and tools/install-deps.sh
# --data. Not in make test: CI has no Keras.
KERAS_PY ?= /work/venv-keras/bin/python
.PHONY: ref-zoo
ref-zoo: tools
	$(Q)KERAS_BACKEND=jax $(KERAS_PY) tests/ref/keras_fixtures_reverse.py
	$(Q)KERAS_BACKEND=jax TFC_BIN=$(abspath $(BIN)) $(KERAS_PY) tests/ref/keras_zoo_reverse.py

# make ref-import: tfc-import against Keras (tests/ref/keras_import_check.py): every model
# ref-zoo builds, saved by Keras as a .keras archive, as JSON with a .weights.h5 and as a
# legacy .h5, imports to the weights Keras held (bit for bit) and its outputs. Needs the same
# Python as ref-zoo. Not in make test: CI has no Keras (test_import checks committed files).
.PHONY: ref-import
ref-import: tools
	$(Q)KERAS_BACKEND=jax TFC_BIN=$(abspath $(BIN)) $(KERAS_PY) tests/ref/keras_import_check.py
