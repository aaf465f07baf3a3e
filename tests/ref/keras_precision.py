#!/usr/bin/env python3
# Writes the Keras parity fixtures of tests/test_precision.c (keras_parity) into
# tests/ref/precision/: per case its tfc YAML (metadata "yaml"), the input x, every weight
# under its Keras 3 variable path (tfc's name for it), and Keras 3's inference output of the
# same model and weights under each dtype policy: "y:float32", "y:bf16" (mixed_bfloat16)
# and "y:float16" (mixed_float16): float32 variables, the layers computing in the 16-bit
# type, as tfc's `precision` (docs/solver.md, Precision). Not run by `make test` (Keras is
# not a CI dependency). To regenerate (Keras 3.15.1 + JAX 0.10.2, CPU):
#   KERAS_BACKEND=jax python tests/ref/keras_precision.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "precision")
L = keras.layers
POLICIES = {"float32": "float32", "bf16": "mixed_bfloat16", "float16": "mixed_float16"}


def mlp():
    x = keras.Input((12,))
    h = L.Dense(16, activation="tanh", name="h")(x)
    y = L.Dense(5, activation="softmax", name="out")(h)
    yaml = ("input: {shape: [12]}\nlayers:\n  - Dense: {name: h, units: 16, activation: tanh}\n"
            "  - Dense: {name: out, units: 5, activation: softmax}\n")
    return keras.Model(x, y), yaml


def cnn():
    x = keras.Input((8, 8, 3))
    h = L.Conv2D(6, 3, padding="same", activation="relu", name="c1")(x)
    h = L.BatchNormalization(name="bn")(h)
    h = L.MaxPooling2D(2, name="pool")(h)
    h = L.Flatten(name="flat")(h)
    y = L.Dense(4, name="out")(h)
    yaml = ("input: {shape: [8, 8, 3]}\nlayers:\n"
            "  - Conv2D: {name: c1, filters: 6, kernel_size: 3, padding: same, activation: relu}\n"
            "  - BatchNormalization: {name: bn}\n  - MaxPooling2D: {name: pool, pool_size: 2}\n"
            "  - Flatten: {name: flat}\n  - Dense: {name: out, units: 4}\n")
    return keras.Model(x, y), yaml


CASES = {"mlp": mlp, "cnn": cnn}
BATCH = 6


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, make in CASES.items():
        rng = np.random.default_rng(41)
        keras.config.set_dtype_policy("float32")
        model, yaml = make()
        weights = {}
        for v in model.weights:  # not 16-bit values; variance positive
            lo, hi = (0.5, 1.5) if any(k in v.path for k in ("gamma", "variance")) else (-0.5, 0.5)
            weights[v.path] = rng.uniform(lo, hi, v.shape).astype("float32")
        x = rng.normal(size=(BATCH,) + tuple(model.input_shape[1:])).astype("float32")
        tensors = {"x": x, **weights}
        for tag, policy in POLICIES.items():
            keras.config.set_dtype_policy(policy)
            m, _ = make()
            for v in m.weights:
                v.assign(weights[v.path])
            tensors["y:" + tag] = np.asarray(m(x, training=False)).astype("float32")
        keras.config.set_dtype_policy("float32")
        meta = {"yaml": yaml, "keras": keras.__version__, "backend": keras.backend.backend()}
        save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
        print(name, json.dumps({k: list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    main()
