#!/usr/bin/env python3
# Writes the Keras parity fixtures of CategoryEncoding, Discretization, IntegerLookup and Hashing
# (tests/test_preprocessing.c) into tests/ref/preprocessing/, in keras_group_norm.py's format
# (its write_cases): per case the tfc YAML, the input x (int32 ids or float32 values), Keras
# 3's output y, MSE targets, the gradients of the weights after the layer (Dense, Embedding)
# and those weights under their Keras 3 paths. The inputs hit every edge: values equal to
# bin boundaries, values out of the vocabulary, repeated values; and hash_table.safetensors,
# TensorFlow's hash buckets (Keras's Hashing's) of 2602 int32 and 306 float32 values. Not run
# by `make test`. To regenerate (Keras 3.15.1 + JAX, CPU; TensorFlow for the hash table):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_preprocessing_numeric.py
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_group_norm import write_cases  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preprocessing")
L = keras.layers
BATCH = 6
BOUNDS = [-1.0, 0.0, 0.5, 2.0]
VOCAB = [12, 7, 30, -5, 0]


def model(shape, dtype, layers, yaml_layers, draw_x):
    """A Sequential of `layers` (functions making them) after Input(shape, dtype), with its
    tfc YAML; draw_x(rng) gives the batch."""
    def make():
        x = keras.Input(shape, dtype=dtype)
        y = x
        for f in layers:
            y = f()(y)
        yaml = ("input: {shape: %s%s}\nlayers:\n" %
                (list(shape), ", dtype: int32" if dtype == "int32" else "")) + yaml_layers
        return keras.Model(x, y), yaml, draw_x
    return make


def ints(lo, hi, shape):
    return lambda rng: rng.integers(lo, hi, (BATCH,) + shape).astype("int32")


def edges(shape):
    """Values on and between the boundaries, beyond both ends."""
    pool = np.array(BOUNDS + [-3.0, -0.5, 0.25, 1.0, 2.5, 7.0, -1.0000001, 1.9999999],
                    "float32")
    return lambda rng: rng.choice(pool, (BATCH,) + shape).astype("float32")


def vocab_ints(shape):
    pool = np.array(VOCAB + [3, -7, 31, 100], "int32")  # the last four are out of vocabulary
    return lambda rng: rng.choice(pool, (BATCH,) + shape).astype("int32")


def dense(units, name="d"):
    return lambda: L.Dense(units, name=name)


def dense_yaml(units, name="d"):
    return "  - Dense: {name: %s, units: %d}\n" % (name, units)


CE, DI, IL = L.CategoryEncoding, L.Discretization, L.IntegerLookup
CASES = {
    # CategoryEncoding on int32 ids: one_hot of (1,) (the axis of 1 replaced), of a sequence,
    # multi_hot and count with repeats, each into a Dense
    "ce_one_hot": model((1,), "int32", [lambda: CE(5, "one_hot", name="c"), dense(3)],
                        "  - CategoryEncoding: {name: c, num_tokens: 5, output_mode: one_hot}\n"
                        + dense_yaml(3), ints(0, 5, (1,))),
    "ce_one_hot_seq": model((3,), "int32", [lambda: CE(4, "one_hot", name="c"), dense(2)],
                            "  - CategoryEncoding: {name: c, num_tokens: 4, "
                            "output_mode: one_hot}\n" + dense_yaml(2), ints(0, 4, (3,))),
    "ce_multi_hot": model((4,), "int32", [lambda: CE(6, name="c"), dense(3)],
                          "  - CategoryEncoding: {name: c, num_tokens: 6}\n" + dense_yaml(3),
                          ints(0, 6, (4,))),
    "ce_count": model((5,), "int32", [lambda: CE(4, "count", name="c"), dense(2)],
                      "  - CategoryEncoding: {name: c, num_tokens: 4, output_mode: count}\n"
                      + dense_yaml(2), ints(0, 4, (5,))),
    # float32 values holding integers (what a float layer hands on)
    "ce_float_count": model((4,), "float32", [lambda: CE(5, "count", name="c"), dense(2)],
                            "  - CategoryEncoding: {name: c, num_tokens: 5, "
                            "output_mode: count}\n" + dense_yaml(2),
                            lambda rng: rng.integers(0, 5, (BATCH, 4)).astype("float32")),
    # Discretization: int indices into an Embedding, the encoded modes into a Dense, int32
    # input values
    "disc_int_embed": model((6,), "float32",
                            [lambda: DI(bin_boundaries=BOUNDS, name="b"),
                             lambda: L.Embedding(5, 3, name="e"), lambda: L.Flatten(name="f"),
                             dense(2)],
                            "  - Discretization: {name: b, bin_boundaries: %s}\n"
                            "  - Embedding: {name: e, input_dim: 5, output_dim: 3}\n"
                            "  - Flatten: {name: f}\n" % BOUNDS + dense_yaml(2), edges((6,))),
    "disc_one_hot": model((3,), "float32",
                          [lambda: DI(bin_boundaries=BOUNDS, output_mode="one_hot", name="b"),
                           dense(2)],
                          "  - Discretization: {name: b, bin_boundaries: %s, "
                          "output_mode: one_hot}\n" % BOUNDS + dense_yaml(2), edges((3,))),
    "disc_multi_hot": model((5,), "float32",
                            [lambda: DI(bin_boundaries=BOUNDS, output_mode="multi_hot",
                                        name="b"), dense(3)],
                            "  - Discretization: {name: b, bin_boundaries: %s, "
                            "output_mode: multi_hot}\n" % BOUNDS + dense_yaml(3), edges((5,))),
    "disc_count": model((5,), "float32",
                        [lambda: DI(bin_boundaries=BOUNDS, output_mode="count", name="b"),
                         dense(3)],
                        "  - Discretization: {name: b, bin_boundaries: %s, "
                        "output_mode: count}\n" % BOUNDS + dense_yaml(3), edges((5,))),
    "disc_ints": model((4,), "int32",
                       [lambda: DI(bin_boundaries=[0.0, 2.0, 3.0], output_mode="count",
                                   name="b"), dense(2)],
                       "  - Discretization: {name: b, bin_boundaries: [0.0, 2.0, 3.0], "
                       "output_mode: count}\n" + dense_yaml(2), ints(-2, 5, (4,))),
    # IntegerLookup with a vocabulary: int indices into an Embedding, two OOV indices
    # (floormod of the value) as multi_hot, count padded to max_tokens, one_hot, and the
    # indices into a CategoryEncoding
    "il_int_embed": model((4,), "int32",
                          [lambda: IL(vocabulary=VOCAB, name="v"),
                           lambda: L.Embedding(6, 3, name="e"), lambda: L.Flatten(name="f"),
                           dense(2)],
                          "  - IntegerLookup: {name: v, vocabulary: %s}\n"
                          "  - Embedding: {name: e, input_dim: 6, output_dim: 3}\n"
                          "  - Flatten: {name: f}\n" % VOCAB + dense_yaml(2), vocab_ints((4,))),
    "il_oov2_multi_hot": model((5,), "int32",
                               [lambda: IL(vocabulary=VOCAB, num_oov_indices=2,
                                           output_mode="multi_hot", name="v"), dense(3)],
                               "  - IntegerLookup: {name: v, vocabulary: %s, "
                               "num_oov_indices: 2, output_mode: multi_hot}\n" % VOCAB
                               + dense_yaml(3), vocab_ints((5,))),
    "il_count_padded": model((5,), "int32",
                             [lambda: IL(vocabulary=VOCAB, max_tokens=9, pad_to_max_tokens=True,
                                         output_mode="count", name="v"), dense(2)],
                             "  - IntegerLookup: {name: v, vocabulary: %s, max_tokens: 9, "
                             "pad_to_max_tokens: true, output_mode: count}\n" % VOCAB
                             + dense_yaml(2), vocab_ints((5,))),
    "il_one_hot": model((2,), "int32",
                        [lambda: IL(vocabulary=VOCAB, num_oov_indices=3,
                                    output_mode="one_hot", name="v"), dense(2)],
                        "  - IntegerLookup: {name: v, vocabulary: %s, num_oov_indices: 3, "
                        "output_mode: one_hot}\n" % VOCAB + dense_yaml(2), vocab_ints((2,))),
    "il_then_ce": model((4,), "int32",
                        [lambda: IL(vocabulary=VOCAB, name="v"),
                         lambda: CE(8, "multi_hot", name="c"), dense(2)],
                        "  - IntegerLookup: {name: v, vocabulary: %s}\n"
                        "  - CategoryEncoding: {name: c, num_tokens: 8}\n" % VOCAB
                        + dense_yaml(2), vocab_ints((4,))),
    # invert: indices (OOV ones and beyond the vocabulary too) back to values, counted
    "il_invert": model((4,), "int32",
                       [lambda: IL(vocabulary=[3, 9, 1, 14], invert=True, name="v"),
                        lambda: CE(16, "count", name="c"), dense(2)],
                       "  - IntegerLookup: {name: v, vocabulary: [3, 9, 1, 14], invert: true}\n"
                       "  - CategoryEncoding: {name: c, num_tokens: 16, output_mode: count}\n"
                       + dense_yaml(2), ints(0, 7, (4,))),
    # Hashing: int indices into an Embedding, masked one_hot, salted (an integer and a pair)
    # count (float values, which Keras casts to int64, in hash_table below: JAX cannot take
    # the gradient through the TensorFlow op Keras hashes them with)
    "hash_int_embed": model((16,), "int32",
                            [lambda: L.Hashing(num_bins=13, name="h"),
                             lambda: L.Embedding(13, 2, name="e"), lambda: L.Flatten(name="f"),
                             dense(2)],
                            "  - Hashing: {name: h, num_bins: 13}\n"
                            "  - Embedding: {name: e, input_dim: 13, output_dim: 2}\n"
                            "  - Flatten: {name: f}\n" + dense_yaml(2), ints(-500, 500, (16,))),
    "hash_mask_one_hot": model((3,), "int32",
                               [lambda: L.Hashing(num_bins=5, mask_value=0,
                                                  output_mode="one_hot", name="h"), dense(2)],
                               "  - Hashing: {name: h, num_bins: 5, mask_value: 0, "
                               "output_mode: one_hot}\n" + dense_yaml(2), ints(-2, 3, (3,))),
    "hash_salt_count": model((8,), "int32",
                             [lambda: L.Hashing(num_bins=7, salt=133, output_mode="count",
                                                name="h"), dense(2)],
                             "  - Hashing: {name: h, num_bins: 7, salt: 133, "
                             "output_mode: count}\n" + dense_yaml(2), ints(-50, 50, (8,))),
    "hash_salt2_multi_hot": model((8,), "int32",
                                  [lambda: L.Hashing(num_bins=9, salt=[7, 2**40 + 3],
                                                     output_mode="multi_hot", name="h"),
                                   dense(2)],
                                  "  - Hashing: {name: h, num_bins: 9, salt: [7, %d], "
                                  "output_mode: multi_hot}\n" % (2**40 + 3) + dense_yaml(2),
                                  ints(-50, 50, (8,))),
}

BIG = 16777213  # a prime below 2^24: the buckets hold in float32 exactly


def hash_table():
    """Every hash bucket TensorFlow gives (Keras's Hashing's ops) for many int32 values and
    float32 values (cast to int64, up to 20 digits): x, fast, strong (key [133, 7]) and xf,
    fastf, of BIG buckets."""
    import tensorflow as tf
    from safetensors.numpy import save_file
    rng = np.random.default_rng(5)
    x = np.concatenate([np.arange(-300, 300), rng.integers(-2**31, 2**31, 2000),
                        [2**31 - 1, -2**31]]).astype("int32")
    xf = np.concatenate([rng.normal(size=300) * 10.0 ** rng.integers(0, 19, 300),
                         [1e18, -9.2e18, 123456789012345678.0, 0.5, -0.5, -1.5]]).astype("float32")

    def buckets(v, strong=False):
        s = tf.strings.as_string(tf.cast(v, "int64"))
        h = (tf.strings.to_hash_bucket_strong(s, BIG, [133, 7]) if strong
             else tf.strings.to_hash_bucket_fast(s, BIG))
        return h.numpy().astype("float32")
    tensors = {"x": x, "fast": buckets(x), "strong": buckets(x, True), "xf": xf,
               "fastf": buckets(xf)}
    save_file(tensors, os.path.join(OUT, "hash_table.safetensors"),
              metadata={"keras": keras.__version__, "buckets": str(BIG)})
    print("hash_table", {k: list(v.shape) for k, v in tensors.items()})


def draw(rng, model, draw_x):
    for v in model.weights:
        v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
    return draw_x(rng)


if __name__ == "__main__":
    write_cases(CASES, OUT, 43, draw)
    hash_table()
