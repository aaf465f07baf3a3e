#!/usr/bin/env python3
# Writes the Keras parity fixture of tests/test_zoo_seq.c into tests/ref/encoder/: Keras 3's
# predictions of model_zoo/fortunes_encoder (configs/models/fortunes_encoder.yaml built as a
# Keras functional model, its zoo weights loaded by tfc's names, which are Keras 3's variable
# paths) for five records of 3 to 30 word ids padded together to 80 steps ("x", "y"), and
# Keras's own largest relative difference between those and each record alone at its own
# length (metadata "alone_vs_80"): Keras's implicit masks make it batch-independent as tfc is.
# The embedding is KerasHub 0.32's own TokenAndPositionEmbedding (its layers import without
# TensorFlow: `pip install --no-deps keras-hub==0.32.0`), which sets the token mask on its
# output in `call`. Not run by `make test` (Keras is not a CI dependency). To regenerate:
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_encoder.py
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import keras_hub
import numpy as np
from safetensors.numpy import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(HERE, "..", "..", "model_zoo", "fortunes_encoder")
OUT = os.path.join(HERE, "encoder")
L = keras.layers
LENGTHS = (3, 11, 17, 30, 6)  # tests/test_zoo_seq.c's records
MAX_LENGTH = 80


def model():
    """configs/models/fortunes_encoder.yaml, layer for layer (the same names)"""
    i = keras.Input((None,), dtype="int32")
    e = keras_hub.layers.TokenAndPositionEmbedding(8000, MAX_LENGTH, 64, mask_zero=True,
                                                   name="embed")(i)
    e = L.Dropout(0.2, name="embed_dropout")(e)
    n = L.LayerNormalization(name="block0_norm1")(e)
    h = L.Add(name="block0_add1")([e, L.MultiHeadAttention(4, 16, name="block0_attention")(n, n)])
    f = L.LayerNormalization(name="block0_norm2")(h)
    f = L.Dense(128, activation="gelu", name="block0_ff1")(f)
    h = L.Add(name="block0_add2")([h, L.Dense(64, name="block0_ff2")(f)])
    h = L.LayerNormalization(name="final_norm")(h)
    h = L.GlobalAveragePooling1D(name="pool")(h)
    h = L.Dropout(0.3, name="pool_dropout")(h)
    return keras.Model(i, L.Dense(8, activation="softmax", name="classes")(h))


def ids(length):
    """record r's word ids (test_zoo_seq.c's fill): LENGTHS[r] ids in [1, 8000), zeros after"""
    x = np.zeros((len(LENGTHS), length), np.int32)
    for r, n in enumerate(LENGTHS):
        for t in range(min(n, length)):
            x[r, t] = 1 + (r * 7919 + t * 104729) % 7999
    return x


def main():
    m = model()
    weights = load_file(os.path.join(ZOO, "fortunes_encoder.safetensors"))
    for v in m.weights:
        v.assign(weights.pop(v.path))
    assert not weights, sorted(weights)  # every zoo weight has its Keras variable
    x = ids(MAX_LENGTH)
    y = np.asarray(m(x, training=False))
    alone = np.concatenate([np.asarray(m(ids(n)[r:r + 1, :n], training=False))
                            for r, n in enumerate(LENGTHS)])
    rel = np.max(np.abs(y - alone) / np.maximum(np.abs(alone), 1e-3))
    os.makedirs(OUT, exist_ok=True)
    meta = {"keras": keras.__version__, "backend": keras.backend.backend(),
            "alone_vs_80": "%.3g" % rel}
    save_file({"x": x, "y": y.astype(np.float32)},
              os.path.join(OUT, "fortunes_encoder.safetensors"), metadata=meta)
    print("fortunes_encoder: Keras alone vs at 80: %.3g relative" % rel)


if __name__ == "__main__":
    main()
