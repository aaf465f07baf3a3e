#!/usr/bin/env python3
# keras_from_yaml.py against the committed Keras fixtures: each fixture under tests/ref/ that
# records its tfc YAML (metadata "yaml", or a NAME.yaml beside it) holds Keras's weights under
# tfc's names, inputs x* and Keras's outputs y* of a model its script built by hand. Here the
# model is built from the YAML alone, loaded by name (every weight tensor used once) and run
# in inference mode; its outputs must match the fixture's. This checks the YAML-to-Keras
# translation over the layer types the zoo does not use. Part of `make ref-zoo`:
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_fixtures_reverse.py
import glob
import os
import sys

import numpy as np
from safetensors import safe_open

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import keras_from_yaml  # noqa: E402

TOLERANCE = 1e-5  # max |difference| / max |Keras's output|, as keras_zoo_reverse.py
# Fixtures whose outputs are not an inference-mode forward pass of their YAML.
NOT_INFERENCE = {
    "augment/augment": "outputs of augmentation layers with fixed parameters (training mode)",
    "norm/block": "Dropout in training mode (block_nodrop is its inference twin)",
}
# Fixtures of what Keras's documentation says where Keras's layer does otherwise
# (docs/layers.md): Keras 3.15's RandomCrop returns its input unchanged at inference, against
# its docstring and its own output shape; tfc and its fixtures resize and crop.
KERAS_DIVERGES = {
    "preprocess/rc_equal_rows": "RandomCrop at inference",
    "preprocess/rc_infer": "RandomCrop at inference",
    "preprocess/rc_small": "RandomCrop at inference",
}
# Weights a fixture records before and after its training steps (after/<layer>/<variable>),
# beside those its outputs were made with; and the fixtures whose outputs were made with the
# weights after the steps (keras_spectral_norm.py: Keras's inference output after them).
STATES = ("after/", "before/")
OUTPUTS_AFTER = {"spectral_norm/image", "spectral_norm/sequence"}


def read(path):
    """(tensors, metadata) of a safetensors file."""
    with safe_open(path, "np") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata() or {}


def fixtures():
    """(name, yaml text, weight tensors, [(x, y)]) of every fixture with a recorded YAML."""
    for path in sorted(glob.glob(os.path.join(HERE, "*", "*.safetensors"))):
        if path.endswith(".io.safetensors"):
            continue
        name = os.path.relpath(path, HERE)[: -len(".safetensors")]
        tensors, meta = read(path)
        text = meta.get("yaml")
        side = path[: -len(".safetensors")]
        if text is None and os.path.exists(side + ".yaml"):
            with open(side + ".yaml") as f:
                text = f.read()
            tensors.update(read(side + ".io.safetensors")[0])
        if text is None or name in NOT_INFERENCE:
            continue
        if name in OUTPUTS_AFTER:
            weights = {k[len("after/"):]: v for k, v in tensors.items()
                       if k.startswith("after/")}
        else:
            weights = {k: v for k, v in tensors.items()
                       if "/" in k and ":" not in k and not k.startswith(STATES)}
        pairs = [(tensors[k], tensors["y" + k[1:]]) for k in sorted(tensors)
                 if k.startswith("x") and "y" + k[1:] in tensors]
        yield name, text, weights, pairs


def main():
    failed, seen, skipped = [], 0, 0
    for name, text, weights, pairs in fixtures():
        seen += 1
        if name in KERAS_DIVERGES:
            print("%-40s skipped: %s" % (name, KERAS_DIVERGES[name]), flush=True)
            skipped += 1
            continue
        try:
            keras_from_yaml.keras.utils.clear_session()
            model = keras_from_yaml.build_text(text)
            keras_from_yaml.load_weights(model, name, weights)
            worst = 0.0
            for x, y in pairs:
                out = keras_from_yaml.predict(model, x)
                if out.shape != y.shape:
                    raise keras_from_yaml.ContractError("output %s, fixture %s"
                                                        % (out.shape, y.shape))
                diff = float(np.abs(out.astype(np.float64) - y).max())
                worst = max(worst, diff / max(float(np.abs(y).max()), 1e-30))
        except Exception as e:  # noqa: BLE001 -- every fixture is reported, whatever broke
            print("%-40s FAILED: %s" % (name, e), flush=True)
            failed.append(name)
            continue
        ok = worst <= TOLERANCE  # no inputs recorded: built and loaded by name
        print("%-40s %d input(s)  max rel %.3e  %s" % (name, len(pairs), worst,
                                                        "ok" if ok else "ABOVE"), flush=True)
        if not ok:
            failed.append(name)
    print("%d fixtures, %d skipped, %d failed %s" % (seen, skipped, len(failed),
                                                     " ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
