"""Keras 3 references for ContrastLimitedAdaptiveHistogramEqualization (tests/test_clahe.c).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_clahe.py
The layer draws nothing and acts in training and at inference alike. For case <c>:
  x_<c>             the input [2, h, w, c]
  y_<c>             the layer's output (layer(x, training=True)); the script checks that
                    the output at inference (training=False) is the same and that the
                    vector-Jacobian product with a random dy (jax.vjp) is zero, as every
                    path from x to y goes through an int32 cast
  yaml_<c>          (metadata) the tfc layer's model
The cases cover tile grids that divide the image and ones that do not (the image padded
symmetrically, more than once over when a tile is larger than the image's side), 1 and 3
channels, clip limits (0: none) and value ranges (one reversed, values outside one).
Writes tests/ref/clahe/clahe.safetensors.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clahe")
CLAHE = "ContrastLimitedAdaptiveHistogramEqualization"


def cases(rng):
    """(name, keras kwargs, tfc yaml args, x)"""
    x = rng.integers(0, 256, (2, 16, 16, 3)).astype(np.float32)
    x[0, :8, :8, 0] = 40.0  # a near-constant tile: clipped
    yield "default", {}, "{}", x
    x = rng.uniform(30, 120, (2, 13, 10, 1)).astype(np.float32)
    yield ("uneven", dict(tile_grid_size=(4, 3), clip_limit=2.0),
           "{tile_grid_size: [4, 3], clip_limit: 2.0}", x)
    x = rng.uniform(0, 1, (2, 9, 11, 3)).astype(np.float32)
    yield ("unit_noclip", dict(value_range=(0, 1), tile_grid_size=(2, 2), clip_limit=0.0),
           "{value_range: [0, 1], tile_grid_size: [2, 2], clip_limit: 0}", x)
    x = rng.uniform(-1.3, 1.3, (2, 20, 7, 3)).astype(np.float32)
    yield ("outside", dict(value_range=(-1, 1), clip_limit=1.5),
           "{value_range: [-1, 1], clip_limit: 1.5}", x)
    x = rng.integers(0, 256, (2, 3, 5, 1)).astype(np.float32)
    yield "tiny", {}, "{}", x
    x = rng.uniform(0, 1, (2, 12, 12, 3)).astype(np.float32) ** 3
    yield ("reversed", dict(value_range=(1, 0), tile_grid_size=(3, 4), clip_limit=3.0),
           "{value_range: [1, 0], tile_grid_size: [3, 4], clip_limit: 3.0}", x)
    x = np.round(rng.normal(128, 20, (2, 32, 24, 3))).astype(np.float32)
    yield ("big_clip", dict(clip_limit=40.0, tile_grid_size=(5, 6)),
           "{clip_limit: 40, tile_grid_size: [5, 6]}", x)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(5)
    tensors, meta = {}, {}
    for name, kw, args, x in cases(rng):
        layer = getattr(L, CLAHE)(**kw)
        dy = rng.uniform(-1, 1, x.shape).astype(np.float32)
        y, vjp = jax.vjp(lambda z: layer(z, training=True), jnp.asarray(x))
        (dx,) = vjp(jnp.asarray(dy))
        dx = np.asarray(dx, np.float32)
        assert not np.any(dx), name
        yi = np.asarray(layer(x, training=False), np.float32)
        assert np.array_equal(yi, np.asarray(y)), name
        tensors.update({"x_" + name: x, "y_" + name: np.asarray(y, np.float32)})
        shape = list(x.shape[1:])
        meta["yaml_" + name] = (f"input: {{shape: {shape}}}\nlayers:\n"
                                f"  - {CLAHE}: {args}\n")
    save_file(tensors, os.path.join(OUT, "clahe.safetensors"), metadata=meta)
    print(f"{len(meta)} cases")


if __name__ == "__main__":
    main()
