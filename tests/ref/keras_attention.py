"""Keras 3 references for tfc's MultiHeadAttention (tests/test_attention.c, keras_parity).

Builds each case's model in Keras 3 with deterministic weights, predicts a small batch, and
writes tests/ref/attention/<case>.safetensors holding the weights under Keras 3's variable
paths (the names tfc gives them: `mha/query/kernel`, ...), the input `x` and the expected
output `y`. The C test binds the same model from YAML, loads the file strictly by name and
compares. Run:  KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_attention.py
"""
import os

import keras
import numpy as np
from keras import layers
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention")


def self_attention():
    x = keras.Input((5, 8), name="input")
    y = layers.MultiHeadAttention(2, 4, name="mha")(x, x)
    return keras.Model(x, y)


def causal():
    x = keras.Input((7, 6), name="input")
    y = layers.MultiHeadAttention(3, 2, output_shape=4, name="mha")(
        x, x, use_causal_mask=True)
    return keras.Model(x, y)


def value_dim():
    # value_dim != key_dim fails in Keras 3.15's fused path on JAX (jax.nn.dot_product_attention
    # wants one head size); dropout > 0 takes its einsum path, the same math at inference
    x = keras.Input((7, 6), name="input")
    y = layers.MultiHeadAttention(3, 2, value_dim=5, output_shape=4, dropout=0.1, name="mha")(
        x, x, use_causal_mask=True)
    return keras.Model(x, y)


def cross():
    x = keras.Input((6, 8), name="input")
    kv = layers.Reshape((3, 16), name="kv")(x)
    k = layers.Dense(5, name="k")(kv)
    y = layers.MultiHeadAttention(2, 4, use_bias=False, name="mha")(x, kv, k)
    return keras.Model(x, y)


def window():
    x = keras.Input((6, 8), name="input")
    y = layers.MultiHeadAttention(2, 4, sliding_window=2, name="mha")(x, x)
    return keras.Model(x, y)


def masked(dropout, causal_mask):
    def build():
        x = keras.Input((6,), dtype="int32", name="input")
        e = layers.Embedding(12, 8, mask_zero=True, name="emb")(x)
        y = layers.MultiHeadAttention(2, 4, dropout=dropout, name="mha")(
            e, e, use_causal_mask=causal_mask)
        return keras.Model(x, y)
    return build


CASES = {
    "self": (self_attention, (3, 5, 8)),
    "causal": (causal, (2, 7, 6)),
    "value_dim": (value_dim, (2, 7, 6)),
    "cross": (cross, (2, 6, 8)),
    "window": (window, (2, 6, 8)),
    # padding at the end of each sequence; rows that see no key: the mean of the values
    "masked": (masked(0.0, False), (3, 6)),
    # the same with a causal mask and dropout (inference): rows that see no key give zeros
    "masked_causal_dropout": (masked(0.25, True), (3, 6)),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (build, shape) in CASES.items():
        model = build()
        rng = np.random.default_rng(7)
        for w in model.weights:
            w.assign(rng.normal(0, 0.4, w.shape).astype("float32"))
        if len(shape) == 2:
            x = rng.integers(1, 12, shape).astype("int32")
            for b in range(shape[0]):
                x[b, shape[1] - b:] = 0  # 0, 1 and 2 padded steps
        else:
            x = rng.uniform(-1, 1, shape).astype("float32")
        y = np.asarray(model.predict(x, verbose=0), dtype="float32")
        tensors = {w.path: np.asarray(w.numpy(), dtype="float32") for w in model.weights}
        tensors["x"], tensors["y"] = x, y
        save_file(tensors, os.path.join(OUT, name + ".safetensors"))
        print(name, {k: v.shape for k, v in tensors.items()})


if __name__ == "__main__":
    main()
