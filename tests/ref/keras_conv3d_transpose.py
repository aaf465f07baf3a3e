#!/usr/bin/env python3
# Writes the Keras parity fixtures of Conv3DTranspose (tests/test_conv3d_transpose.c) into
# tests/ref/conv3d_transpose/, in keras_group_norm.py's format (write_cases): one safetensors
# file per case holding its tfc YAML (metadata "yaml"), the input x, Keras 3's output y, MSE
# targets t, the loss's gradients with respect to x ("dx") and each weight ("grad:<path>"),
# and every weight under its Keras 3 variable path. Not run by `make test` (Keras is not a
# CI dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_conv3d_transpose.py
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_conv3d import draw, sequential  # noqa: E402
from keras_group_norm import write_cases  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv3d_transpose")


def ct_valid():
    """Valid padding, a kernel of three sizes, unequal strides (below, equal to and above the
    kernel: the default output_padding max(k, s) - k), tanh."""
    return sequential((3, 3, 2, 3), [
        ("Conv3DTranspose", dict(name="t", filters=4, kernel_size=[2, 3, 1],
                                 strides=[1, 2, 3], activation="tanh"))])


def ct_same():
    """Same padding at stride 2 (odd kernel), then stride 1 with an even kernel, no bias."""
    return sequential((2, 3, 2, 3), [
        ("Conv3DTranspose", dict(name="t", filters=3, kernel_size=3, strides=2,
                                 padding="same")),
        ("Conv3DTranspose", dict(name="t2", filters=2, kernel_size=2, padding="same",
                                 use_bias=False))])


def ct_output_padding():
    """output_padding with valid padding (a list of three, 0 on one axis), then with same
    padding (one integer) at a stride of 2, no bias, relu."""
    return sequential((2, 2, 2, 2), [
        ("Conv3DTranspose", dict(name="t", filters=3, kernel_size=[2, 3, 2],
                                 strides=[2, 3, 2], output_padding=[1, 2, 0])),
        ("Conv3DTranspose", dict(name="t2", filters=2, kernel_size=[3, 2, 1], strides=[1, 2, 2],
                                 padding="same", output_padding=[0, 1, 1], use_bias=False,
                                 activation="relu"))])


def ct_dilation():
    """Dilation with same padding, then with valid padding (sigmoid)."""
    return sequential((3, 3, 2, 2), [
        ("Conv3DTranspose", dict(name="t", filters=3, kernel_size=2, dilation_rate=[2, 1, 2],
                                 padding="same")),
        ("Conv3DTranspose", dict(name="t2", filters=2, kernel_size=[3, 1, 2], dilation_rate=2,
                                 activation="sigmoid"))])


CASES = {"ct_valid": ct_valid, "ct_same": ct_same, "ct_output_padding": ct_output_padding,
         "ct_dilation": ct_dilation}


if __name__ == "__main__":
    write_cases(CASES, OUT, 47, draw)
