#!/usr/bin/env python3
# Writes the Keras parity fixtures of Maximum and Minimum (tests/test_merge.c) into
# tests/ref/merge/ and those of Dot (tests/test_merge.c) into tests/ref/dot/, in keras_norm.py's format: one safetensors file per case holding its tfc
# YAML (metadata "yaml"), the input x, Keras 3's inference output y, MSE targets t and, but
# for `seq_steps`, the gradients of the MSE loss (training mode) with respect to x ("dx", float
# inputs) and each weight ("grad:<path>"), and every weight under its Keras 3 variable path.
# The gradients are JAX's: a tie in jnp.maximum / jnp.minimum gives half to each side, the
# rule tfc follows (src/layers/merge.c). Not run by `make test` (Keras is not a CI
# dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_merge.py [merge|dot]
# (no argument: both folders).
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras

from keras_group_norm import write_cases

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "merge")
DOT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dot")
L = keras.layers


def ties():
    """Float inputs straight into the merges, with ties: ReLU's zeros against a ReLU Dense's,
    an input twice (a three-way tie at every element), x against relu(x) (equal where x >= 0),
    and two Dense layers with the same weights (b2 gets b's): equal everywhere, so only the
    tie rule decides which kernel gets the gradient (the ties above reach the same weights
    and input either way)."""
    x = keras.Input((5,))
    r = L.ReLU(name="r")(x)
    a = L.Dense(5, activation="relu", name="a")(x)
    mx = L.Maximum(name="mx")([r, a, r])
    mn = L.Minimum(name="mn")([x, r])
    b = L.Dense(5, name="b")(x)
    b2 = L.Dense(5, name="b2")(x)
    mn2 = L.Minimum(name="mn2")([b, b2, a])
    c = L.Concatenate(name="cat")([mx, mn, mn2])
    y = L.Dense(3, name="out")(c)
    yaml = ("input: {shape: [5]}\nlayers:\n"
            "  - ReLU: {name: r}\n"
            "  - Dense: {name: a, units: 5, activation: relu, inputs: input}\n"
            "  - Maximum: {name: mx, inputs: [r, a, r]}\n"
            "  - Minimum: {name: mn, inputs: [input, r]}\n"
            "  - Dense: {name: b, units: 5, inputs: input}\n"
            "  - Dense: {name: b2, units: 5, inputs: input}\n"
            "  - Minimum: {name: mn2, inputs: [b, b2, a]}\n"
            "  - Concatenate: {name: cat, inputs: [mx, mn, mn2]}\n"
            "  - Dense: {name: out, units: 3}\n")
    return keras.Model(x, y), yaml, 0.0


def image():
    """Images (H, W, C) from four convolutions: Maximum of three, Minimum of that and the
    fourth."""
    x = keras.Input((4, 5, 2))
    a = L.Conv2D(3, 3, padding="same", name="ca")(x)
    b = L.Conv2D(3, 3, padding="same", name="cb")(x)
    c = L.Conv2D(3, 1, name="cc")(x)
    mx = L.Maximum(name="mx")([a, b, c])
    d = L.Conv2D(3, 1, name="cd")(x)
    mn = L.Minimum(name="mn")([mx, d])
    y = L.Dense(2, name="out")(mn)
    yaml = ("input: {shape: [4, 5, 2]}\nlayers:\n"
            "  - Conv2D: {name: ca, filters: 3, kernel_size: 3, padding: same}\n"
            "  - Conv2D: {name: cb, filters: 3, kernel_size: 3, padding: same, inputs: input}\n"
            "  - Conv2D: {name: cc, filters: 3, kernel_size: 1, inputs: input}\n"
            "  - Maximum: {name: mx, inputs: [ca, cb, cc]}\n"
            "  - Conv2D: {name: cd, filters: 3, kernel_size: 1, inputs: input}\n"
            "  - Minimum: {name: mn, inputs: [mx, cd]}\n"
            "  - Dense: {name: out, units: 2}\n")
    return keras.Model(x, y), yaml, 0.0


SEQ_YAML = ("input: {shape: [6], dtype: int32}\nlayers:\n"
            "  - Embedding: {name: e, input_dim: 11, output_dim: 4, mask_zero: true}\n"
            "  - Dense: {name: a, units: 4}\n"
            "  - Dense: {name: b, units: 4, activation: relu, inputs: e}\n")


def seq_masked():
    """Masked token sequences (Embedding's mask_zero) through both merges, then the masked
    mean: the padding steps' values do not reach the output."""
    x = keras.Input((6,), dtype="int32")
    e = L.Embedding(11, 4, mask_zero=True, name="e")(x)
    a = L.Dense(4, name="a")(e)
    b = L.Dense(4, activation="relu", name="b")(e)
    mx = L.Maximum(name="mx")([a, b, e])
    mn = L.Minimum(name="mn")([e, a])
    s = L.Add(name="s")([mx, mn])
    p = L.GlobalAveragePooling1D(name="p")(s)
    y = L.Dense(3, name="out")(p)
    yaml = SEQ_YAML + ("  - Maximum: {name: mx, inputs: [a, b, e]}\n"
                       "  - Minimum: {name: mn, inputs: [e, a]}\n"
                       "  - Add: {name: s, inputs: [mx, mn]}\n"
                       "  - GlobalAveragePooling1D: {name: p}\n"
                       "  - Dense: {name: out, units: 3}\n")
    return keras.Model(x, y), yaml, None


def seq_steps():
    """The merged masked sequences themselves (inference only): on a padding step Keras's
    Merge gives the first input's values."""
    x = keras.Input((6,), dtype="int32")
    e = L.Embedding(11, 4, mask_zero=True, name="e")(x)
    a = L.Dense(4, name="a")(e)
    b = L.Dense(4, activation="relu", name="b")(e)
    mx = L.Maximum(name="mx")([a, e, b])
    mn = L.Minimum(name="mn")([b, a])
    y = L.Concatenate(name="cat")([mx, mn])
    yaml = SEQ_YAML + ("  - Maximum: {name: mx, inputs: [a, e, b]}\n"
                       "  - Minimum: {name: mn, inputs: [b, a]}\n"
                       "  - Concatenate: {name: cat, inputs: [mx, mn]}\n")
    return keras.Model(x, y), yaml, None


CASES = {"ties": ties, "image": image, "seq_masked": seq_masked, "seq_steps": seq_steps}
BATCH = 3


def weights_and_input(rng, model, offset):
    """Weights uniform in [-0.5, 0.5) (b2 then gets b's, in `ties`); token ids with padding at
    the end and in the middle where offset is None, else a normal batch centred at offset."""
    for v in model.weights:
        v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
    if "b2" in [layer.name for layer in model.layers]:
        model.get_layer("b2").set_weights(model.get_layer("b").get_weights())
    shape = (BATCH,) + tuple(model.input_shape[1:])
    if offset is None:
        x = rng.integers(1, 11, size=shape).astype("int32")
        x[0, 4:] = 0
        x[1, 2] = 0
        return x
    return (rng.normal(size=shape) + offset).astype("float32")


def dot_vectors():
    """Dot of two feature vectors (batch, 4): the plain dot product and the cosine
    (normalize), each (batch, 1) as Keras gives it, then joined."""
    x = keras.Input((6,))
    a = L.Dense(4, name="a")(x)
    b = L.Dense(4, activation="tanh", name="b")(x)
    d = L.Dot(axes=1, name="d")([a, b])
    c = L.Dot(axes=-1, normalize=True, name="c")([a, b])
    j = L.Concatenate(name="j")([d, c])
    y = L.Dense(2, name="out")(j)
    yaml = ("input: {shape: [6]}\nlayers:\n"
            "  - Dense: {name: a, units: 4}\n"
            "  - Dense: {name: b, units: 4, activation: tanh, inputs: input}\n"
            "  - Dot: {name: d, axes: 1, inputs: [a, b]}\n"
            "  - Dot: {name: c, axes: -1, normalize: true, inputs: [a, b]}\n"
            "  - Concatenate: {name: j, inputs: [d, c]}\n"
            "  - Dense: {name: out, units: 2}\n")
    return keras.Model(x, y), yaml, 0.0


def dot_sequences():
    """Sequences (5, F): attention-like scores (axes 2, the second input transposed), the
    steps' axis of both (the first transposed), mixed axes, negative axes with normalize,
    and a vector against a sequence (its output (5))."""
    x = keras.Input((5, 3))
    q = L.Dense(4, name="q")(x)
    k = L.Dense(4, name="k")(x)
    v = L.Dense(5, name="v")(x)
    w = L.Dense(4, name="w")(L.Flatten(name="f")(x))
    s = L.Dot(axes=2, name="s")([q, k])
    g = L.Dot(axes=(1, 1), name="g")([q, v])
    h = L.Dot(axes=(1, 2), name="h")([q, v])
    n = L.Dot(axes=(-2, -1), normalize=True, name="n")([q, v])
    u = L.Dot(axes=(1, 2), name="u")([w, q])
    j = L.Concatenate(name="j")([g, h, n])
    y = L.Concatenate(name="y")([L.Flatten(name="fs")(s), L.Flatten(name="fj")(j), u])
    y = L.Dense(3, name="out")(y)
    yaml = ("input: {shape: [5, 3]}\nlayers:\n"
            "  - Dense: {name: q, units: 4}\n"
            "  - Dense: {name: k, units: 4, inputs: input}\n"
            "  - Dense: {name: v, units: 5, inputs: input}\n"
            "  - Flatten: {name: f, inputs: input}\n"
            "  - Dense: {name: w, units: 4}\n"
            "  - Dot: {name: s, axes: 2, inputs: [q, k]}\n"
            "  - Dot: {name: g, axes: [1, 1], inputs: [q, v]}\n"
            "  - Dot: {name: h, axes: [1, 2], inputs: [q, v]}\n"
            "  - Dot: {name: n, axes: [-2, -1], normalize: true, inputs: [q, v]}\n"
            "  - Dot: {name: u, axes: [1, 2], inputs: [w, q]}\n"
            "  - Concatenate: {name: j, inputs: [g, h, n]}\n"
            "  - Flatten: {name: fs, inputs: s}\n"
            "  - Flatten: {name: fj, inputs: j}\n"
            "  - Concatenate: {name: y, inputs: [fs, fj, u]}\n"
            "  - Dense: {name: out, units: 3}\n")
    return keras.Model(x, y), yaml, 0.0


def dot_images():
    """Rank-3 examples (3, 4, 2): a middle axis of both (each permuted), with normalize, the
    first axis of one against the last of the other, and a vector against a middle axis with
    normalize."""
    x = keras.Input((3, 4, 2))
    a = L.Dense(2, name="a")(x)
    b = L.Dense(2, activation="tanh", name="b")(x)
    c = L.Permute((3, 2, 1), name="p")(b)
    v = L.Dense(4, name="v")(L.Flatten(name="f")(x))
    m = L.Dot(axes=2, name="m")([a, b])
    mn = L.Dot(axes=(2, 2), normalize=True, name="mn")([a, b])
    e = L.Dot(axes=(1, 3), name="e")([a, c])
    vn = L.Dot(axes=(1, 2), normalize=True, name="vn")([v, a])
    y = L.Concatenate(name="y")([L.Flatten(name="f" + t.name)(t) for t in (m, mn, e, vn)])
    y = L.Dense(3, name="out")(y)
    yaml = ("input: {shape: [3, 4, 2]}\nlayers:\n"
            "  - Dense: {name: a, units: 2}\n"
            "  - Dense: {name: b, units: 2, activation: tanh, inputs: input}\n"
            "  - Permute: {name: p, dims: [3, 2, 1]}\n"
            "  - Flatten: {name: f, inputs: input}\n"
            "  - Dense: {name: v, units: 4}\n"
            "  - Dot: {name: m, axes: 2, inputs: [a, b]}\n"
            "  - Dot: {name: mn, axes: [2, 2], normalize: true, inputs: [a, b]}\n"
            "  - Dot: {name: e, axes: [1, 3], inputs: [a, p]}\n"
            "  - Dot: {name: vn, axes: [1, 2], normalize: true, inputs: [v, a]}\n"
            "  - Flatten: {name: fm, inputs: m}\n"
            "  - Flatten: {name: fmn, inputs: mn}\n"
            "  - Flatten: {name: fe, inputs: e}\n"
            "  - Flatten: {name: fvn, inputs: vn}\n"
            "  - Concatenate: {name: y, inputs: [fm, fmn, fe, fvn]}\n"
            "  - Dense: {name: out, units: 3}\n")
    return keras.Model(x, y), yaml, 0.0


def dot_clamp():
    """normalize at Keras's clamp: the input (its second example scaled by 1e-8, a norm below
    keras.config.epsilon() = 1e-7) against a Dense of it, so that example's scale is 1e7,
    not rsqrt of its sum of squares; its gradient there 1e7 dy (jnp.minimum's side)."""
    x = keras.Input((4,))
    a = L.Dense(4, name="a")(x)
    c = L.Dot(axes=1, normalize=True, name="c")([x, a])
    d = L.Dot(axes=1, name="d")([x, a])
    y = L.Concatenate(name="y")([c, d])
    yaml = ("input: {shape: [4]}\nlayers:\n"
            "  - Dense: {name: a, units: 4}\n"
            "  - Dot: {name: c, axes: 1, normalize: true, inputs: [input, a]}\n"
            "  - Dot: {name: d, axes: 1, inputs: [input, a]}\n"
            "  - Concatenate: {name: y, inputs: [c, d]}\n")
    return keras.Model(x, y), yaml, "tiny"


DOT_CASES = {"vectors": dot_vectors, "sequences": dot_sequences, "images": dot_images,
             "clamp": dot_clamp}


def dot_draw(rng, model, arg):
    """weights_and_input's weights and normal inputs; "tiny": the second example times 1e-8"""
    x = weights_and_input(rng, model, 0.0 if arg == "tiny" else arg)
    if arg == "tiny":
        x[1] *= 1e-8
    return x


if __name__ == "__main__":
    which = sys.argv[1:] or ["merge", "dot"]
    if "merge" in which:
        write_cases(CASES, OUT, 43, weights_and_input,
                    trained=lambda name: name != "seq_steps")
    if "dot" in which:
        write_cases(DOT_CASES, DOT_OUT, 44, dot_draw)
