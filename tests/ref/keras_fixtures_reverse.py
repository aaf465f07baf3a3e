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
        weights = {k: v for k, v in tensors.items() if "/" in k and ":" not in k}
        pairs = [(tensors[k], tensors["y" + k[1:]]) for k in sorted(tensors)
                 if k.startswith("x") and "y" + k[1:] in tensors]
        yield name, text, weights, pairs


def main():
    failed, seen = [], 0
    for name, text, weights, pairs in fixtures():
        seen += 1
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
        ok = worst <= TOLERANCE and pairs
        print("%-40s %d input(s)  max rel %.3e  %s" % (name, len(pairs), worst,
                                                        "ok" if ok else "ABOVE"), flush=True)
        if not ok:
            failed.append(name)
    print("%d fixtures, %d failed %s" % (seen, len(failed), " ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
