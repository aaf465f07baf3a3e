#!/usr/bin/env python3
# Writes the Keras parity fixtures of Permute and UnitNormalization (tests/test_permute.c)
# into tests/ref/permute/, in keras_group_norm.py's format: one safetensors file per case
# holding its tfc YAML (metadata "yaml"), the input x, Keras 3's inference output y, MSE
# targets t, the gradients of Keras's MSE loss (training mode) with respect to x ("dx", float
# inputs) and each weight ("grad:<path>"), and every weight under its Keras 3 variable path
# (an RNN cell's segment dropped, as tfc names it).
# Not run by `make test` (Keras is not a CI dependency). To regenerate (Keras 3.15.1 + JAX):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_permute.py
import json
import os
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "permute")
L = keras.layers


def permute_seq():
    """(steps, features) swapped between two Dense layers."""
    x = keras.Input((5, 4))
    h = L.Dense(3, name="d0")(x)
    h = L.Permute((2, 1), name="p")(h)
    y = L.Dense(2, name="d1")(h)
    yaml = ("input: {shape: [5, 4]}\nlayers:\n  - Dense: {name: d0, units: 3}\n"
            "  - Permute: {name: p, dims: [2, 1]}\n  - Dense: {name: d1, units: 2}\n")
    return keras.Model(x, y), yaml


def permute_3d():
    """Permute first (the input's gradient), a rotation then a swap of the last two."""
    x = keras.Input((3, 4, 5))
    h = L.Permute((3, 1, 2), name="p0")(x)
    h = L.Dense(3, name="d")(h)
    y = L.Permute((1, 3, 2), name="p1")(h)
    yaml = ("input: {shape: [3, 4, 5]}\nlayers:\n  - Permute: {name: p0, dims: [3, 1, 2]}\n"
            "  - Dense: {name: d, units: 3}\n  - Permute: {name: p1, dims: [1, 3, 2]}\n")
    return keras.Model(x, y), yaml


def permute_4d():
    """Four axes reversed, then an identity."""
    x = keras.Input((2, 3, 4, 5))
    h = L.Permute((4, 3, 2, 1), name="p0")(x)
    y = L.Permute((1, 2, 3, 4), name="p1")(h)
    yaml = ("input: {shape: [2, 3, 4, 5]}\nlayers:\n"
            "  - Permute: {name: p0, dims: [4, 3, 2, 1]}\n"
            "  - Permute: {name: p1, dims: [1, 2, 3, 4]}\n")
    return keras.Model(x, y), yaml


def permute_mask():
    """A mask into Permute stops there (Keras warns and drops it): the LSTM sees none."""
    x = keras.Input((6,), dtype="int32")
    h = L.Embedding(10, 6, mask_zero=True, name="e")(x)
    h = L.Permute((2, 1), name="p")(h)
    y = L.LSTM(3, name="l")(h)
    yaml = ("input: {shape: [6], dtype: int32}\nlayers:\n"
            "  - Embedding: {name: e, input_dim: 10, output_dim: 6, mask_zero: true}\n"
            "  - Permute: {name: p, dims: [2, 1]}\n  - LSTM: {name: l, units: 3}\n")
    return keras.Model(x, y), yaml


def unit_last():
    """The default axis, first (the input's gradient) and after a Dense."""
    x = keras.Input((7,))
    h = L.UnitNormalization(name="u0")(x)
    h = L.Dense(5, name="d")(h)
    y = L.UnitNormalization(axis=-1, name="u1")(h)
    yaml = ("input: {shape: [7]}\nlayers:\n  - UnitNormalization: {name: u0}\n"
            "  - Dense: {name: d, units: 5}\n  - UnitNormalization: {name: u1, axis: -1}\n")
    return keras.Model(x, y), yaml


def unit_axes():
    """A middle axis, two trailing axes, then the first two axes (a leading block)."""
    x = keras.Input((3, 4, 5))
    h = L.UnitNormalization(axis=2, name="u0")(x)
    h = L.UnitNormalization(axis=[2, 3], name="u1")(h)
    h = L.Dense(5, name="d")(h)
    y = L.UnitNormalization(axis=[-3, -2], name="u2")(h)
    yaml = ("input: {shape: [3, 4, 5]}\nlayers:\n  - UnitNormalization: {name: u0, axis: 2}\n"
            "  - UnitNormalization: {name: u1, axis: [2, 3]}\n  - Dense: {name: d, units: 5}\n"
            "  - UnitNormalization: {name: u2, axis: [-3, -2]}\n")
    return keras.Model(x, y), yaml


def unit_mask():
    """The mask passes UnitNormalization (Keras's supports_masking) into the LSTM."""
    x = keras.Input((6,), dtype="int32")
    h = L.Embedding(10, 4, mask_zero=True, name="e")(x)
    h = L.UnitNormalization(name="u")(h)
    y = L.LSTM(3, name="l")(h)
    yaml = ("input: {shape: [6], dtype: int32}\nlayers:\n"
            "  - Embedding: {name: e, input_dim: 10, output_dim: 4, mask_zero: true}\n"
            "  - UnitNormalization: {name: u}\n  - LSTM: {name: l, units: 3}\n")
    return keras.Model(x, y), yaml


def unit_zero():
    """Keras's epsilon rule: a row of norm 5e-13 is clamped (rsqrt above 1e12): y = 1e12 x,
    dx = 1e12 dy (the clamp side of the min). An all-zero row gives y = 0 and, under JAX, a
    NaN gradient (0 times rsqrt's infinite derivative), where tfc gives 1e12 dy."""
    x = keras.Input((4,))
    y = L.UnitNormalization(name="u")(x)
    yaml = "input: {shape: [4]}\nlayers:\n  - UnitNormalization: {name: u}\n"
    return keras.Model(x, y), yaml


def tfc_path(path):
    """l/lstm_cell/kernel -> l/kernel: the cell's segment dropped (tfc's names, SPEC §5)"""
    return "/".join(p for p in path.split("/") if not p.endswith("_cell"))


CASES = {"permute_seq": permute_seq, "permute_3d": permute_3d, "permute_4d": permute_4d,
         "permute_mask": permute_mask, "unit_last": unit_last, "unit_axes": unit_axes,
         "unit_mask": unit_mask, "unit_zero": unit_zero}
BATCH = 3


def main():
    os.makedirs(OUT, exist_ok=True)
    warnings.filterwarnings("ignore", message=".*does not support masking.*")
    rng = np.random.default_rng(43)
    for name, make in CASES.items():
        model, yaml = make()
        for v in model.weights:  # weights away from Keras's ones and zeros
            v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
        shape = (BATCH,) + tuple(model.input_shape[1:])
        ints = model.inputs[0].dtype.startswith("int")
        if ints:  # padded tails (id 0), one sequence unpadded
            x = rng.integers(1, 10, size=shape).astype("int32")
            x[0, 4:] = 0
            x[1, 2:] = 0
        else:
            x = rng.normal(size=shape).astype("float32")
        if name == "unit_zero":
            x[0] = 0.0
            x[1] = np.array([5e-13, 0, 0, 0], "float32")
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

        if ints:
            gw = jax.grad(loss)(tv, jnp.asarray(x))
        else:
            gw, gx = jax.grad(loss, argnums=(0, 1))(tv, jnp.asarray(x))
            tensors["dx"] = np.asarray(gx)
        for v, g in zip(model.trainable_variables, gw):
            tensors["grad:" + tfc_path(v.path)] = np.asarray(g)
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
        print(name, json.dumps({k: list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    main()
