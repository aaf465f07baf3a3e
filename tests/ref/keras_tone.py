"""Keras 3 references for AutoContrast and Equalization (tests/test_augment_tone.c).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_tone.py
Neither layer draws anything, so each case is the layer itself. For case <c>:
  x_<c>, dy_<c>     the input [2, 3, 4, 3] and an output gradient
  y_<c>             the layer's output in training (layer(x, training=True))
  yi_<c>            its output at inference (training=False: AutoContrast the same,
                    Equalization x itself)
  dx_<c>            the vector-Jacobian product of the training output with dy (jax.vjp);
                    where JAX's is NaN (AutoContrast's constant channel: 0 times 255 / 0)
                    dy, the gradient of y = x that tfc gives there
  yaml_<c>          (metadata) the tfc layer's model
Equalization takes its histogram per channel over the whole batch, as Keras does.
Writes tests/ref/tone/tone.safetensors.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tone")


def cases(rng):
    """(name, layer, tfc yaml, x)"""
    shape = (2, 3, 4, 3)
    x = rng.uniform(10, 200, shape).astype(np.float32)
    x[1, :, :, 2] = 37.0  # a constant channel: kept
    yield "autocontrast_default", L.AutoContrast(), "AutoContrast: {}", x
    x = rng.uniform(-0.5, 0.7, shape).astype(np.float32)
    yield ("autocontrast_range", L.AutoContrast(value_range=(1, -1)),
           "AutoContrast: {value_range: [1, -1]}", x)
    x = rng.integers(0, 256, shape).astype(np.float32)
    x[:, :, :, 2] = 7.0  # one non-zero bin over the batch: kept
    x[0, 0, :, 1] = 250.0  # repeats
    yield "equalize_default", L.Equalization(), "Equalization: {}", x
    x = rng.uniform(0, 1, shape).astype(np.float32)
    yield ("equalize_bins", L.Equalization(value_range=(0, 1), bins=16),
           "Equalization: {value_range: [0, 1], bins: 16}", x)
    x = rng.uniform(-1.2, 1.2, shape).astype(np.float32)
    yield ("equalize_outside", L.Equalization(value_range=(-1, 1), bins=64),
           "Equalization: {value_range: [-1, 1], bins: 64}", x)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(11)
    tensors, meta = {}, {}
    for name, layer, yaml, x in cases(rng):
        dy = rng.uniform(-1, 1, x.shape).astype(np.float32)
        y, vjp = jax.vjp(lambda z: layer(z, training=True), jnp.asarray(x))
        (dx,) = vjp(jnp.asarray(dy))
        dx = np.asarray(dx, np.float32)
        dx = np.where(np.isnan(dx), dy, dx)
        tensors.update({"x_" + name: x, "dy_" + name: dy, "y_" + name: np.asarray(y, np.float32),
                        "yi_" + name: np.asarray(layer(x, training=False), np.float32),
                        "dx_" + name: dx})
        meta["yaml_" + name] = f"input: {{shape: [3, 4, 3]}}\nlayers:\n  - {yaml}\n"
    save_file(tensors, os.path.join(OUT, "tone.safetensors"), metadata=meta)
    print(f"{len(meta)} cases")


if __name__ == "__main__":
    main()
