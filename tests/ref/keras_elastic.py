"""Keras 3 references for RandomElasticTransform (tests/test_augment_elastic.c).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_elastic.py
Keras's draws cannot be tfc's, so each case fixes them: the normals (jax.random.normal,
patched to return the case's noise for both of elastic_transform's calls, as one key gives
both there), the distortion factor s and which images move; the layer's own
_transform_images (its alpha and sigma, the JAX backend's elastic_transform: gaussian_blur,
map_coordinates; the where and the clip) then gives the output. For case <c>:
  x_<c>, dy_<c>     the input [n, h, w, c] and an output gradient
  noise_<c>         the normals [n, h, w]
  y_<c>             the output in training with those draws
  dx_<c>            the vector-Jacobian product of that output with dy (jax.vjp)
  s_<c>             [s, moved (1 every image, 0 none)]
  yaml_<c>          (metadata) the tfc layer's arguments (YAML flow map)
Writes tests/ref/elastic/elastic.safetensors.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "elastic")


def cases(rng):
    """(name, keras kwargs, tfc yaml args, x, s, moved)"""
    x = rng.uniform(0, 255, (1, 24, 20, 3)).astype(np.float32)
    yield "bilinear_reflect", {}, "{}", x, 0.8, 1
    x = rng.uniform(0, 255, (2, 20, 24, 1)).astype(np.float32)
    yield ("nearest_constant", dict(interpolation="nearest", fill_mode="constant",
                                    fill_value=7.0),
           "{interpolation: nearest, fill_mode: constant, fill_value: 7}", x, 1.0, 1)
    x = rng.uniform(0, 255, (2, 16, 16, 3)).astype(np.float32)
    yield "wrap", dict(fill_mode="wrap"), "{fill_mode: wrap}", x, 0.6, 1
    x = rng.uniform(0, 255, (1, 18, 14, 3)).astype(np.float32)
    yield ("mirror_nearest", dict(fill_mode="mirror", interpolation="nearest"),
           "{fill_mode: mirror, interpolation: nearest}", x, 0.9, 1)
    x = rng.uniform(-0.2, 1.2, (1, 22, 18, 3)).astype(np.float32)
    yield ("nearest_fill_unit", dict(fill_mode="nearest", value_range=(0, 1)),
           "{fill_mode: nearest, value_range: [0, 1]}", x, 1.0, 1)
    x = rng.uniform(-50, 300, (2, 8, 9, 2)).astype(np.float32)
    yield "unmoved_clip", {}, "{}", x, 0.5, 0


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(23)
    tensors, meta = {}, {}
    normal = jax.random.normal
    for name, kw, args, x, s, moved in cases(rng):
        layer = L.RandomElasticTransform(**kw)
        n, h, w, _ = x.shape
        # larger than standard normals, so that reads reach past the image's edges
        noise = (rng.standard_normal((n, h, w)) * 4).astype(np.float32)
        dy = rng.uniform(-1, 1, x.shape).astype(np.float32)
        jax.random.normal = lambda key, shape, dtype=None: jnp.asarray(noise, dtype)
        try:
            t = {"apply_transform": jnp.full((n,), bool(moved)),
                 "distortion_factor": jnp.asarray(s, jnp.float32),
                 "seed": 0}
            f = lambda z: layer._transform_images(z, t, layer.interpolation)
            y, vjp = jax.vjp(f, jnp.asarray(x))
            (dx,) = vjp(jnp.asarray(dy))
        finally:
            jax.random.normal = normal
        yi = np.asarray(layer(x, training=False))
        assert np.array_equal(yi, x), name  # the identity at inference, unclipped
        tensors.update({"x_" + name: x, "dy_" + name: dy, "noise_" + name: noise,
                        "y_" + name: np.asarray(y, np.float32),
                        "dx_" + name: np.asarray(dx, np.float32),
                        "s_" + name: np.asarray([s, moved], np.float32)})
        meta["yaml_" + name] = args
    save_file(tensors, os.path.join(OUT, "elastic.safetensors"), metadata=meta)
    print(f"{len(meta)} cases")


if __name__ == "__main__":
    main()
