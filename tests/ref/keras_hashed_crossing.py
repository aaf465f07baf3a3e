#!/usr/bin/env python3
# Writes tests/ref/preprocessing/cross_table.safetensors for tests/test_hashed_crossing.c:
# Keras 3's HashedCrossing (TensorFlow's tf.sparse.cross_hashed underneath) of int32 values
# a, b, c (a 41 x 41 grid of small values around 0, 3000 drawn over the whole int32 range,
# both ends and their neighbours): bins2 the bins of (a, b) and bins3 of (a, b, c) into
# 16777213 bins (a prime below 2^24, which float32 holds exactly), small2 of (a, b) into 7;
# and Keras's one_hot output of (x, x) and (x, x, x) into 5 bins for the first 64 values of
# a, as the C test's model computes them. Not run by `make test`. To regenerate (Keras
# 3.15.1 + JAX, CPU, with tensorflow-cpu for the op):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_hashed_crossing.py
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preprocessing")
BIG = 16777213


def cross(inputs, bins, mode="int"):
    layer = keras.layers.HashedCrossing(num_bins=bins, output_mode=mode)
    return np.asarray(layer(tuple(v[:, None].astype("int64") for v in inputs)))


def main():
    rng = np.random.default_rng(11)
    g = np.arange(-20, 21)
    ga, gb = np.meshgrid(g, g)
    ends = [2**31 - 1, -2**31, 2**31 - 2, -2**31 + 1, 0, -1, 1]
    a = np.concatenate([ga.ravel(), rng.integers(-2**31, 2**31, 3000), ends, ends[::-1]])
    b = np.concatenate([gb.ravel(), rng.integers(-2**31, 2**31, 3000), ends[::-1], ends])
    c = np.concatenate([rng.integers(-50, 50, ga.size), rng.integers(-2**31, 2**31, 3000),
                        ends, ends])
    a, b, c = (v.astype("int32") for v in (a, b, c))
    x = a[:64]
    tensors = {
        "a": a, "b": b, "c": c,
        "bins2": cross([a, b], BIG)[:, 0].astype("int32"),
        "bins3": cross([a, b, c], BIG)[:, 0].astype("int32"),
        "small2": cross([a, b], 7)[:, 0].astype("int32"),
        "x": x[:, None],
        "one_hot2": cross([x, x], 5, "one_hot").astype("float32"),
        "one_hot3": cross([x, x, x], 5, "one_hot").astype("float32"),
    }
    os.makedirs(OUT, exist_ok=True)
    save_file(tensors, os.path.join(OUT, "cross_table.safetensors"))
    print({k: v.shape for k, v in tensors.items()})


if __name__ == "__main__":
    main()
