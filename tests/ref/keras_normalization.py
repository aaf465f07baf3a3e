#!/usr/bin/env python3
# Writes the Keras parity fixtures of Normalization (tests/test_normalization.c) into
# tests/ref/normalization/, one safetensors file per case holding its tfc YAML (metadata
# "yaml"), inputs x, Keras 3's inference output y, MSE targets t, the gradient of Keras's MSE
# loss with respect to x ("dx") and every weight under its Keras 3 variable path. The case
# "adapt" also holds the tabular data set Keras adapted to ("data", "labels"): tfc adapts to
# it in its trainer, then predicts with Keras's Dense weights. Not run by `make test` (Keras
# is not a CI dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_normalization.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "normalization")
L = keras.layers


def tabular(rng, n=203):
    """Five features of different scales and offsets (Auto MPG-like), one of them constant
    (variance 0: Keras divides by 1e-7); a linear target with noise."""
    scale = np.array([40.0, 0.5, 900.0, 3.0, 0.0])
    offset = np.array([100.0, -3.0, 3000.0, 0.2, 2.0])
    x = (rng.normal(size=(n, 5)) * scale + offset).astype("float32")
    y = (x[:, :4] @ np.array([0.01, -1.0, 0.001, 2.0]) + rng.normal(size=n) * 0.1)
    return x, y.astype("float32")[:, None]


def adapt_case(rng):
    data, labels = tabular(rng)
    x = keras.Input((5,))
    norm = L.Normalization(axis=-1, name="normalization")
    y = L.Dense(1, name="dense")(norm(x))
    model = keras.Model(x, y)
    norm.adapt(data)
    dense = model.get_layer("dense")
    dense.kernel.assign(rng.uniform(-0.5, 0.5, (5, 1)).astype("float32"))
    dense.bias.assign(np.array([0.25], "float32"))
    yaml = ("input: {shape: [5]}\nlayers:\n"
            "  - Normalization: {name: normalization, axis: -1}\n"
            "  - Dense: {name: dense, units: 1}\n")
    xin = data[:7].copy()
    xin[:, 4] = 2.0  # the constant feature at its value: 0 out
    return model, yaml, xin, {"data": data, "labels": labels}


def given(shape, yaml_args, **kw):
    def make(rng):
        x = keras.Input(shape)
        y = L.Normalization(name="n", **kw)(x)
        yaml = "input: {shape: %s}\nlayers:\n  - Normalization: {name: n, %s}\n" % (
            json.dumps(list(shape)), yaml_args)
        xin = (rng.normal(size=(3,) + shape) * 2 + 1).astype("float32")
        return keras.Model(x, y), yaml, xin, {}
    return make


def adapted(shape, yaml_args, **kw):
    """Keras adapted (axis other than the default); tfc loads its weights."""
    def make(rng):
        x = keras.Input(shape)
        layer = L.Normalization(name="n", **kw)
        y = layer(x)
        layer.adapt((rng.normal(size=(40,) + shape) * 3 - 2).astype("float32"))
        yaml = "input: {shape: %s}\nlayers:\n  - Normalization: {name: n, %s}\n" % (
            json.dumps(list(shape)), yaml_args)
        xin = (rng.normal(size=(3,) + shape) * 2 + 1).astype("float32")
        return keras.Model(x, y), yaml, xin, {}
    return make


CASES = {
    "adapt": adapt_case,
    "given_scalar": given((4, 3), "mean: 3.0, variance: 2.0", mean=3.0, variance=2.0),
    "given_list": given((4,), "mean: [1, -2, 0.5, 3], variance: [4, 0.25, 1, 0]",
                        mean=[1, -2, 0.5, 3], variance=[4, 0.25, 1, 0]),
    "given_none": given((3, 2), "axis: null, mean: 1.5, variance: 0.25", axis=None,
                        mean=1.5, variance=0.25),
    "given_2d": given((3, 4), "axis: [-2, -1], mean: [[1, 2, 3, 4]], variance: [[1, 4, 9, 16]]",
                      axis=(-2, -1), mean=[[1, 2, 3, 4]], variance=[[1, 4, 9, 16]]),
    "given_invert": given((4,), "mean: [1, -2, 0.5, 3], variance: [4, 0.25, 1, 2], "
                          "invert: true", mean=[1, -2, 0.5, 3], variance=[4, 0.25, 1, 2],
                          invert=True),
    "adapted_none": adapted((3, 2), "axis: null", axis=None),
    "adapted_2d": adapted((3, 4), "axis: [1, 2]", axis=(1, 2)),
    "adapted_invert": adapted((5,), "invert: true", invert=True),
}


def check_tfc_layout(model, x, y):
    """The weights as tfc writes them (count a float32 scalar) load into a fresh Keras model
    by path, as Keras's load_own_variables does (assign, then finalize_state), and predict
    Keras's outputs: Keras reads tfc's files."""
    inp = keras.Input(model.input_shape[1:])
    norm = L.Normalization(axis=-1, name="normalization")
    fresh = keras.Model(inp, L.Dense(1, name="dense")(norm(inp)))
    for v in fresh.weights:
        value = np.asarray([w for w in model.weights if w.path == v.path][0].value)
        v.assign(value.astype("float32"))
    norm.finalize_state()
    assert np.array_equal(np.asarray(fresh(x)), y), "tfc's weight layout does not load in Keras"


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(43)
    for name, make in CASES.items():
        model, yaml, x, extra = make(rng)
        y = np.asarray(model(x, training=False))
        if name == "adapt":
            check_tfc_layout(model, x, y)
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = dict(extra, x=x, y=y, t=t)
        for v in model.weights:
            tensors[v.path] = np.asarray(v.value)
        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]

        def loss(xin):
            out, _ = model.stateless_call(tv, ntv, xin, training=True)
            return jnp.mean(jnp.mean(jnp.square(out - t), axis=-1))

        tensors["dx"] = np.asarray(jax.grad(loss)(jnp.asarray(x)))
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
        print(name, json.dumps({k: [str(v.dtype)] + list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    main()
