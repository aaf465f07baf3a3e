#!/usr/bin/env python3
# Writes the Keras parity fixtures of keras.applications' own layers that tfc has: LayerScale
# (keras.applications.convnext.LayerScale, tests/test_layer_scale.c) into
# tests/ref/layer_scale/ and CustomScaleLayer
# (keras.applications.inception_resnet_v2.CustomScaleLayer, tests/test_custom_scale.c) into
# tests/ref/custom_scale/, in keras_group_norm.py's format: one
# safetensors file per case holding its tfc YAML (metadata "yaml"), the input x, Keras 3's
# inference output y, MSE targets t, the gradients of Keras's MSE loss (training mode) with
# respect to x ("dx") and each weight ("grad:<path>"), and every weight under its Keras 3
# variable path, but LayerScale's factor as <layer>/gamma: Keras's layer creates it without a
# name, so its path reads variable, variable_1, ... numbered over the session; tfc names it by
# the attribute that holds it (self.gamma).
# Not run by `make test` (Keras is not a CI dependency). To regenerate (Keras 3.15.1 + JAX):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_layer_scale.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from keras.src.applications.convnext import LayerScale
from keras.src.applications.inception_resnet_v2 import CustomScaleLayer
from safetensors.numpy import save_file

REF = os.path.dirname(os.path.abspath(__file__))
L = keras.layers


def image():
    """ConvNeXt's block end: a pointwise Dense over an image's channels, then LayerScale
    first in the graph's order after it (the input's gradient through both)."""
    x = keras.Input((3, 4, 5))
    h = LayerScale(1e-6, 5, name="s0")(x)
    h = L.Dense(6, name="d")(h)
    y = LayerScale(0.5, 6, name="s1")(h)
    yaml = ("input: {shape: [3, 4, 5]}\nlayers:\n"
            "  - LayerScale: {name: s0, init_values: 1.0e-6, projection_dim: 5}\n"
            "  - Dense: {name: d, units: 6}\n"
            "  - LayerScale: {name: s1, init_values: 0.5, projection_dim: 6}\n")
    return keras.Model(x, y), yaml


def vector():
    """On a vector, between two Dense layers."""
    x = keras.Input((7,))
    h = L.Dense(4, name="d0")(x)
    h = LayerScale(2.0, 4, name="s")(h)
    y = L.Dense(3, name="d1")(h)
    yaml = ("input: {shape: [7]}\nlayers:\n  - Dense: {name: d0, units: 4}\n"
            "  - LayerScale: {name: s, init_values: 2.0, projection_dim: 4}\n"
            "  - Dense: {name: d1, units: 3}\n")
    return keras.Model(x, y), yaml


def join_image():
    """Inception-ResNet's residual join: the block's input plus its branch times scale, then
    the activation (tanh here, smooth for the gradients); the model input is both the first
    input and, through the branch, the second."""
    x = keras.Input((3, 4, 5))
    c = L.Conv2D(5, 1, name="c")(x)
    s = CustomScaleLayer(0.17, name="s")([x, c])
    y = L.Activation("tanh", name="a")(s)
    yaml = ("input: {shape: [3, 4, 5]}\nlayers:\n"
            "  - Conv2D: {name: c, filters: 5, kernel_size: 1}\n"
            "  - CustomScaleLayer: {name: s, scale: 0.17, inputs: [input, c]}\n"
            "  - Activation: {name: a, activation: tanh}\n")
    return keras.Model(x, y), yaml


def join_vector():
    """Two Dense branches, a negative scale, then a Dense (both inputs' gradients)."""
    x = keras.Input((7,))
    d0 = L.Dense(4, name="d0")(x)
    d1 = L.Dense(4, name="d1")(x)
    s = CustomScaleLayer(-1.5, name="s")([d0, d1])
    y = L.Dense(3, name="d2")(s)
    yaml = ("input: {shape: [7]}\nlayers:\n  - Dense: {name: d0, units: 4}\n"
            "  - Dense: {name: d1, units: 4, inputs: input}\n"
            "  - CustomScaleLayer: {name: s, scale: -1.5, inputs: [d0, d1]}\n"
            "  - Dense: {name: d2, units: 3}\n")
    return keras.Model(x, y), yaml


def tfc_path(path):
    """s0/variable_1 -> s0/gamma (above)"""
    layer, leaf = path.split("/")
    return layer + "/gamma" if leaf.startswith("variable") else path


CASES = {"layer_scale/image": image, "layer_scale/vector": vector,
         "custom_scale/image": join_image, "custom_scale/vector": join_vector}
BATCH = 3


def main():
    rng = np.random.default_rng(47)
    for name, make in CASES.items():
        model, yaml = make()
        for v in model.weights:  # weights away from their constant starts
            v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
        x = rng.normal(size=(BATCH,) + tuple(model.input_shape[1:])).astype("float32")
        y = np.asarray(model(x, training=False))
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = {"x": x, "y": y, "t": t}
        for v in model.weights:
            tensors[tfc_path(v.path)] = np.asarray(v.value)
        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]

        def loss(tv, xin):
            out, _ = model.stateless_call(tv, ntv, xin, training=True)
            return jnp.mean(jnp.mean(jnp.square(out - t), axis=-1))

        gw, gx = jax.grad(loss, argnums=(0, 1))(tv, jnp.asarray(x))
        tensors["dx"] = np.asarray(gx)
        for v, g in zip(model.trainable_variables, gw):
            tensors["grad:" + tfc_path(v.path)] = np.asarray(g)
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        path = os.path.join(REF, name + ".safetensors")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        save_file(tensors, path, metadata=meta)
        print(name, json.dumps({k: list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    main()
