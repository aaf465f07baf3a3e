#!/usr/bin/env python3
# Writes the Keras parity fixtures of EinsumDense (tests/test_einsum_dense.c) into
# tests/ref/einsum_dense/, in keras_group_norm.py's format: one safetensors file per case
# holding its tfc YAML (metadata "yaml"), the input x, Keras 3's inference output y, MSE
# targets t, the gradients of Keras's MSE loss with respect to x ("dx") and each weight
# ("grad:<path>"), and every weight under its Keras 3 variable path.
# Not run by `make test` (Keras is not a CI dependency). To regenerate (Keras 3.15.1 + JAX):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_einsum_dense.py
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keras
import numpy as np
from keras_group_norm import write_cases

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "einsum_dense")
L = keras.layers
BATCH = 3


def model(shape, layers):
    """A model of EinsumDense layers, each (name, equation, output_shape, bias_axes,
    activation), on an input of `shape`; its Keras model and tfc YAML."""
    x = keras.Input(shape)
    h = x
    yaml = "input: {shape: %s}\nlayers:\n" % list(shape)
    for name, eq, out, bias, act in layers:
        h = L.EinsumDense(eq, output_shape=out, bias_axes=bias, activation=act, name=name)(h)
        o = "null" if out is None else str(out).replace("None", "null")
        yaml += ("  - EinsumDense: {name: %s, equation: \"%s\", output_shape: %s%s%s}\n"
                 % (name, eq, o, ", bias_axes: %s" % bias if bias else "",
                    ", activation: %s" % act if act else ""))
    return keras.Model(x, h), yaml


CASES = {
    # Dense: "ab,bc->ac" with its bias, then without
    "dense": lambda: model((5,), [("e0", "ab,bc->ac", 4, "c", "tanh"),
                                  ("e1", "ab,bc->ac", 3, None, None)]),
    # a projection of each step, bias over the output's last axis, then over the steps'
    "sequence": lambda: model((4, 5), [("e0", "abc,cd->abd", [4, 3], "d", "sigmoid"),
                                       ("e1", "abc,cd->abd", [4, 2], "b", None)]),
    # MultiHeadAttention's query projection and output projection
    "mha": lambda: model((4, 5), [("q", "abc,cde->abde", [None, 2, 3], "de", None),
                                  ("o", "abde,deg->abg", [None, 5], "g", "tanh")]),
    # the bias on the heads only: Keras's shape (2, 1), broadcast over the last axis
    "bias_d": lambda: model((4, 5), [("q", "abc,cde->abde", [None, 2, 3], "d", None),
                                     ("o", "abde,deg->abg", [None, 2], "g", None)]),
    # '...' in front (batch and steps) and at the end (with a bias of Keras's (5, 1)); one
    # axis in the leading '...' besides the batch: with two, Keras's symbolic output shape
    # has them reversed (compute_output_shape inserts each at 1), which the next layer builds on
    "ellipsis": lambda: model((3, 4), [("e0", "...b,bc->...c", 3, "c", "tanh"),
                                       ("e1", "ab...,bc->ac...", 5, "c", None)]),
    # a shared letter (a GEMM per b), a kernel read transposed and a kernel permuted
    "shared": lambda: model((4, 5), [("s", "abc,bcd->abd", [4, 3], "d", None),
                                     ("t", "abc,dc->abd", [4, 6], "bd", "tanh"),
                                     ("p", "abc,cdb->adb", [2, 4], "b", None)]),
    # letters of the input alone, summed away: the steps ("abc,cd->ad"), and one of three
    # axes beside a shared letter and a kernel (d, b) that moves
    "summed": lambda: model((4, 5), [("e0", "abc,cd->ad", 3, "d", "tanh")]),
    "summed_shared": lambda: model((3, 4, 5), [("e0", "abcd,db->ab", [3], "b", None),
                                               ("e1", "ab,bc->ac", 2, "c", None)]),
}


def weights_and_input(rng, model, _):
    for v in model.weights:
        v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
    shape = (BATCH,) + tuple(model.input_shape[1:])
    return rng.normal(size=shape).astype("float32")


if __name__ == "__main__":
    write_cases({k: (lambda f: lambda: f() + (None,))(f) for k, f in CASES.items()}, OUT, 47,
                weights_and_input)
