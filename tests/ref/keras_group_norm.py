#!/usr/bin/env python3
# Writes the Keras parity fixtures of GroupNormalization (tests/test_norm.c) into
# tests/ref/group_norm/, in keras_norm.py's format: one safetensors file per case holding its
# tfc YAML (metadata "yaml"), the input x, Keras 3's inference output y, MSE targets t, the
# gradients of Keras's MSE loss (training mode) with respect to x ("dx") and each weight
# ("grad:<path>"), and every weight under its Keras 3 variable path. Not run by `make test`
# (Keras is not a CI dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_group_norm.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "group_norm")
L = keras.layers


def image():
    """Images (H, W, C): one group per channel (instance normalisation), a convolution, then
    2 groups of 4. (No per-channel bias or affine right before a per-channel normalisation:
    that would remove it, and its gradient would be rounding noise.)"""
    x = keras.Input((6, 5, 3))
    h = L.GroupNormalization(groups=-1, epsilon=0.01, name="gn_inst")(x)
    h = L.Conv2D(8, 3, padding="same", name="conv")(h)
    y = L.GroupNormalization(groups=2, name="gn")(h)
    yaml = ("input: {shape: [6, 5, 3]}\nlayers:\n"
            "  - GroupNormalization: {name: gn_inst, groups: -1, epsilon: 0.01}\n"
            "  - Conv2D: {name: conv, filters: 8, kernel_size: 3, padding: same}\n"
            "  - GroupNormalization: {name: gn, groups: 2}\n")
    return keras.Model(x, y), yaml, 3.0  # inputs centred at 3: the statistics' shift


def image_raw():
    """GroupNormalization first (the input's gradient), inputs 3 off zero."""
    x = keras.Input((4, 4, 6))
    y = L.GroupNormalization(groups=3, name="gn")(x)
    yaml = ("input: {shape: [4, 4, 6]}\nlayers:\n  - GroupNormalization: {name: gn, groups: 3}\n")
    return keras.Model(x, y), yaml, 3.0


def sequence():
    """Sequences (steps, C); center and scale off."""
    x = keras.Input((7, 6))
    h = L.GroupNormalization(groups=1, center=False, name="gn_nc")(x)
    h = L.GroupNormalization(groups=3, name="gn")(h)
    h = L.Dense(6, use_bias=False, activation="tanh", name="d0")(h)
    h = L.GroupNormalization(groups=6, scale=False, name="gn_ns")(h)
    h = L.Dense(6, name="d")(h)
    y = L.GroupNormalization(groups=2, center=False, scale=False, name="gn_none")(h)
    yaml = ("input: {shape: [7, 6]}\nlayers:\n"
            "  - GroupNormalization: {name: gn_nc, groups: 1, center: false}\n"
            "  - GroupNormalization: {name: gn, groups: 3}\n"
            "  - Dense: {name: d0, units: 6, use_bias: false, activation: tanh}\n"
            "  - GroupNormalization: {name: gn_ns, groups: 6, scale: false}\n"
            "  - Dense: {name: d, units: 6}\n"
            "  - GroupNormalization: {name: gn_none, groups: 2, center: false, "
            "scale: false}\n")
    return keras.Model(x, y), yaml, 0.5


def axes():
    """A channel axis other than the last: axis 1 (channels first) and -2."""
    x = keras.Input((4, 6, 5))
    h = L.GroupNormalization(groups=2, axis=1, name="gn_first")(x)
    y = L.GroupNormalization(groups=3, axis=-2, name="gn_mid")(h)
    yaml = ("input: {shape: [4, 6, 5]}\nlayers:\n"
            "  - GroupNormalization: {name: gn_first, groups: 2, axis: 1}\n"
            "  - GroupNormalization: {name: gn_mid, groups: 3, axis: -2}\n")
    return keras.Model(x, y), yaml, 0.5


CASES = {"image": image, "image_raw": image_raw, "sequence": sequence, "axes": axes}
BATCH = 3


def weights_and_input(rng, model, offset):
    """Weights away from Keras's ones and zeros; a normal input batch centred at offset."""
    for v in model.weights:
        v.assign(rng.uniform(0.5, 1.5, v.shape).astype("float32") if "gamma" in v.path
                 else rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
    shape = (BATCH,) + tuple(model.input_shape[1:])
    return (rng.normal(size=shape) + offset).astype("float32")


def write_cases(cases, out, seed, draw, trained=lambda name: True):
    """One fixture per case of `cases` (name: a function giving (model, yaml, argument of
    draw)) into the folder out; draw(rng, model, argument) sets the weights and returns x.
    The cases `trained` accepts get the MSE loss's gradients: the input's ("dx", float
    inputs) and each weight's ("grad:<path>")."""
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    for name, make in cases.items():
        model, yaml, arg = make()
        x = draw(rng, model, arg)
        y = np.asarray(model(x, training=False))
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = {"x": x, "y": y, "t": t}
        for v in model.weights:
            tensors[v.path] = np.asarray(v.value)
        if trained(name):
            tv = [v.value for v in model.trainable_variables]
            ntv = [v.value for v in model.non_trainable_variables]

            def loss(tv, xin):
                pred, _ = model.stateless_call(tv, ntv, xin, training=True)
                return jnp.mean(jnp.mean(jnp.square(pred - t), axis=-1))

            gw, gx = jax.grad(loss, argnums=(0, 1), allow_int=True)(tv, jnp.asarray(x))
            if np.issubdtype(x.dtype, np.floating):
                tensors["dx"] = np.asarray(gx)
            for v, g in zip(model.trainable_variables, gw):
                tensors["grad:" + v.path] = np.asarray(g)
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        save_file(tensors, os.path.join(out, name + ".safetensors"), metadata=meta)
        print(name, json.dumps({k: list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    write_cases(CASES, OUT, 41, weights_and_input)
