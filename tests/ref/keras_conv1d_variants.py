#!/usr/bin/env python3
# Writes the Keras parity fixtures of Conv1DTranspose, SeparableConv1D and DepthwiseConv1D
# (tests/test_conv1d.c, variants_keras_parity) into tests/ref/conv1d_variants/ through
# keras_group_norm.py's write_cases: one safetensors file per case holding its tfc YAML (metadata
# "yaml"), the input x, Keras 3's inference output y, MSE targets t, the gradients of Keras's
# MSE loss with respect to x ("dx") and each weight ("grad:<path>"), and every weight under
# its Keras 3 variable path. Not run by `make test` (Keras is not a CI dependency). To
# regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_conv1d_variants.py
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras

from keras_group_norm import write_cases

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv1d_variants")
L = keras.layers


def model(shape, layers, yaml_layers):
    x = keras.Input(shape)
    h = x
    for layer in layers:
        h = layer(h)
    yaml = "input: {shape: %s}\nlayers:\n" % list(shape)
    yaml += "".join("  - %s\n" % line for line in yaml_layers)
    return keras.Model(x, h), yaml, None


def transpose():
    """valid at stride 2 (a kernel longer than the stride), then same with output_padding."""
    return model((7, 3), [
        L.Conv1DTranspose(4, 3, strides=2, activation="tanh", name="t1"),
        L.Conv1DTranspose(2, 2, strides=3, padding="same", output_padding=1, use_bias=False,
                          name="t2")], [
        "Conv1DTranspose: {name: t1, filters: 4, kernel_size: 3, strides: 2, activation: tanh}",
        "Conv1DTranspose: {name: t2, filters: 2, kernel_size: 2, strides: 3, padding: same, "
        "output_padding: 1, use_bias: false}"])


def transpose_dilated():
    """dilation 2 with same padding, then a kernel shorter than the stride (valid)."""
    return model((6, 2), [
        L.Conv1DTranspose(3, [3], dilation_rate=2, padding="same", name="t1"),
        L.Conv1DTranspose(2, 2, strides=3, output_padding=[2], name="t2")], [
        "Conv1DTranspose: {name: t1, filters: 3, kernel_size: [3], dilation_rate: 2, "
        "padding: same}",
        "Conv1DTranspose: {name: t2, filters: 2, kernel_size: 2, strides: 3, "
        "output_padding: [2]}"])


def separable():
    """same at stride 2 with depth_multiplier 2; valid dilated without bias; strided and
    dilated at once (Keras's JAX backend allows it)."""
    return model((12, 3), [
        L.SeparableConv1D(4, 3, strides=2, padding="same", depth_multiplier=2,
                          activation="tanh", name="s1"),
        L.SeparableConv1D(3, 2, dilation_rate=2, use_bias=False, name="s2"),
        L.SeparableConv1D(2, 2, strides=2, dilation_rate=2, padding="same", name="s3")], [
        "SeparableConv1D: {name: s1, filters: 4, kernel_size: 3, strides: 2, padding: same, "
        "depth_multiplier: 2, activation: tanh}",
        "SeparableConv1D: {name: s2, filters: 3, kernel_size: 2, dilation_rate: 2, "
        "use_bias: false}",
        "SeparableConv1D: {name: s3, filters: 2, kernel_size: 2, strides: 2, dilation_rate: 2, "
        "padding: same}"])


def depthwise():
    """same at stride 2 with depth_multiplier 2; valid dilated without bias; strided and
    dilated at once."""
    return model((11, 3), [
        L.DepthwiseConv1D(3, strides=2, padding="same", depth_multiplier=2, activation="tanh",
                          name="d1"),
        L.DepthwiseConv1D(2, dilation_rate=2, use_bias=False, name="d2"),
        L.DepthwiseConv1D([2], strides=[2], dilation_rate=[2], padding="same",
                          depth_multiplier=3, name="d3")], [
        "DepthwiseConv1D: {name: d1, kernel_size: 3, strides: 2, padding: same, "
        "depth_multiplier: 2, activation: tanh}",
        "DepthwiseConv1D: {name: d2, kernel_size: 2, dilation_rate: 2, use_bias: false}",
        "DepthwiseConv1D: {name: d3, kernel_size: [2], strides: [2], dilation_rate: [2], "
        "padding: same, depth_multiplier: 3}"])


def chain():
    """All three in one model (the input's gradient runs back through each)."""
    return model((9, 4), [
        L.DepthwiseConv1D(3, padding="same", name="d"),
        L.SeparableConv1D(3, 3, strides=2, name="s"),
        L.Conv1DTranspose(2, 3, strides=2, padding="same", name="t")], [
        "DepthwiseConv1D: {name: d, kernel_size: 3, padding: same}",
        "SeparableConv1D: {name: s, filters: 3, kernel_size: 3, strides: 2}",
        "Conv1DTranspose: {name: t, filters: 2, kernel_size: 3, strides: 2, padding: same}"])


CASES = {"transpose": transpose, "transpose_dilated": transpose_dilated,
         "separable": separable, "depthwise": depthwise, "chain": chain}


def uniform(rng, m, _):
    """Weights away from Keras's initial zeros; an input batch of 3 uniform in [-1, 1)."""
    for v in m.weights:
        v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
    return rng.uniform(-1, 1, (3,) + tuple(m.input_shape[1:])).astype("float32")


if __name__ == "__main__":
    write_cases(CASES, OUT, 43, uniform)
