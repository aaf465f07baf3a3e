#!/usr/bin/env python3
# Writes the Keras parity fixtures of Conv1DTranspose, SeparableConv1D and DepthwiseConv1D
# (tests/test_conv1d.c, conv1d_variants_keras) into tests/ref/conv1d_variants/, in
# keras_group_norm.py's format: one safetensors file per case holding its tfc YAML (metadata
# "yaml"), the input x, Keras 3's inference output y, MSE targets t, the gradients of Keras's
# MSE loss with respect to x ("dx") and each weight ("grad:<path>"), and every weight under
# its Keras 3 variable path. Not run by `make test` (Keras is not a CI dependency). To
# regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_conv1d_variants.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv1d_variants")
L = keras.layers


def model(shape, layers, yaml_layers):
    x = keras.Input(shape)
    h = x
    for layer in layers:
        h = layer(h)
    yaml = "input: {shape: %s}\nlayers:\n" % list(shape)
    yaml += "".join("  - %s\n" % line for line in yaml_layers)
    return keras.Model(x, h), yaml


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
BATCH = 3


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(43)
    for name, make in CASES.items():
        m, yaml = make()
        for v in m.weights:  # weights away from Keras's initial zeros
            v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
        shape = (BATCH,) + tuple(m.input_shape[1:])
        x = rng.uniform(-1, 1, shape).astype("float32")
        y = np.asarray(m(x, training=False))
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = {"x": x, "y": y, "t": t}
        for v in m.weights:
            tensors[v.path] = np.asarray(v.value)
        tv = [v.value for v in m.trainable_variables]
        ntv = [v.value for v in m.non_trainable_variables]

        def loss(tv, xin):
            out, _ = m.stateless_call(tv, ntv, xin, training=True)
            return jnp.mean(jnp.mean(jnp.square(out - t), axis=-1))

        gw, gx = jax.grad(loss, argnums=(0, 1))(tv, jnp.asarray(x))
        tensors["dx"] = np.asarray(gx)
        for v, g in zip(m.trainable_variables, gw):
            tensors["grad:" + v.path] = np.asarray(g)
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
        print(name, json.dumps({k: list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    main()
