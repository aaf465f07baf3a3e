"""Keras 3 references for RandomPerspective and RandomSharpness (tests/test_augment_persp.c).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_augment_persp.py
Writes tests/ref/augment_persp/augment_persp.safetensors:
- RandomSharpness, its factor pinned (a range [f, f]): the input `x` [2, 6, 7, 3] (uniform in
  [0, 1)), the weights `w` of the loss sum(y w), and per case its tfc YAML (metadata
  `yaml_<case>`), Keras's output `y_<case>` and input gradient `dx_<case>`, through the
  layer's own call in training.
- RandomPerspective: its corners are 8 draws a range cannot pin, so the script draws them as
  tfc does (core/augment.h's tfc_perspective_draw: Philox4x32-10 at (key, step, 16 i + k),
  ported below) for the warp desc in the metadata `desc_<case>` ("key step plo phi scale
  bilinear fill_value"), builds Keras's transformation from them (apply when u1 < p, end
  points start + start f) and runs the layer's transform_images: the input `px` [3, 8, 9, 2],
  weights `pw`, Keras's output `py_<case>`, input gradient `pdx_<case>` and homography
  `ph_<case>` [3, 8] (compute_homography_matrix; the identity where not applied). The test
  runs tfc's warp op on that desc.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import numpy as np
from keras import layers as L
from keras.src.backend.jax.image import compute_homography_matrix
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "augment_persp")
SHAPE = (2, 6, 7, 3)
PSHAPE = (3, 8, 9, 2)
M32 = 0xFFFFFFFF


def philox(key, ctr_lo, ctr_hi):
    """core/rng.h's tfc_philox: Philox4x32 with 10 rounds."""
    c = [ctr_lo & M32, ctr_lo >> 32, ctr_hi & M32, (ctr_hi >> 32) & M32]
    k0, k1 = key & M32, key >> 32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & M32, (p0 >> 32) ^ c[3] ^ k1, p0 & M32]
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c


def tfc_uniform(key, step, i):
    """core/rng.h's tfc_rng_uniform: 24 bits of lane i % 4 of block i / 4, as a float32."""
    return np.float32((philox(key, i >> 2, step)[i & 3] >> 8) * (1.0 / 16777216.0))


def draw_range(u, lo, hi):
    """lo + u (hi - lo) in float32, as tfc and jax.random.uniform."""
    return np.float32(u * np.float32(np.float32(hi) - np.float32(lo)) + np.float32(lo))


def sharpness_cases():
    for f in (0.0, 0.2, 0.5, 0.9, 1.0):
        yield (f"sharp_{f}", L.RandomSharpness(factor=(f, f), value_range=(0, 1)),
               f"RandomSharpness: {{factor: [{f}, {f}], value_range: [0, 1]}}")
    yield ("sharp_range", L.RandomSharpness(factor=(0.8, 0.8), value_range=(0.75, 0.15)),
           "RandomSharpness: {factor: [0.8, 0.8], value_range: [0.75, 0.15]}")
    yield ("sharp_255", L.RandomSharpness(factor=(0.3, 0.3)),
           "RandomSharpness: {factor: [0.3, 0.3]}")


def perspective_cases():
    """(name, key, step, factor range, scale, interpolation, fill_value)"""
    yield "persp_bilinear", 0x1234, 3, (1.0, 1.0), 1.0, "bilinear", 0.0
    yield "persp_nearest", 0x5678, 1, (1.0, 1.0), 1.0, "nearest", 0.5
    yield "persp_scale", 0x9ABC, 7, (1.0, 1.0), 0.4, "bilinear", -1.0
    yield "persp_half", 0x4322, 2, (0.5, 0.5), 0.8, "bilinear", 0.25


def perspective_outcome(key, step, factor, scale, n, h, w):
    """tfc's draws as Keras's transformation for a batch of n images h x w."""
    apply, pf = [], []
    for i in range(n):
        u = [tfc_uniform(key, step, 16 * i + k) for k in range(10)]
        p = draw_range(u[0], factor[0], factor[1])
        apply.append(bool(u[1] < p))
        pf.append([[draw_range(u[2 + 2 * j + a], -0.5 * scale, 0.5 * scale) for a in range(2)]
                   for j in range(4)])
    start = jnp.asarray([[[0.0, 0.0], [w - 1, 0.0], [0.0, h - 1], [w - 1, h - 1]]] * n,
                        jnp.float32)
    end = start + start * jnp.asarray(pf, jnp.float32)
    return {"apply_perspective": jnp.asarray(apply), "start_points": start,
            "end_points": end, "input_shape": (n, h, w, PSHAPE[3])}


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(11)
    x = rng.uniform(0, 1, SHAPE).astype(np.float32)
    w = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    px = rng.uniform(0, 1, PSHAPE).astype(np.float32)
    pw = rng.uniform(-1, 1, PSHAPE).astype(np.float32)
    tensors, meta = {"x": x, "w": w, "px": px, "pw": pw}, {}
    for name, layer, yaml in sharpness_cases():
        f = lambda v, layer=layer: layer(v, training=True)
        tensors["y_" + name] = np.asarray(f(jnp.asarray(x)), np.float32)
        tensors["dx_" + name] = np.asarray(
            jax.grad(lambda v: jnp.sum(f(v) * w))(jnp.asarray(x)), np.float32)
        meta["yaml_" + name] = f"input: {{shape: {list(SHAPE[1:])}}}\nlayers:\n  - {yaml}\n"
    n, h, wd = PSHAPE[:3]
    for name, key, step, factor, scale, interp, fill in perspective_cases():
        layer = L.RandomPerspective(factor=factor, scale=scale, interpolation=interp,
                                    fill_value=fill)
        t = perspective_outcome(key, step, factor, scale, n, h, wd)
        f = lambda v, t=t, layer=layer: layer.transform_images(v, t, training=True)
        tensors["py_" + name] = np.asarray(f(jnp.asarray(px)), np.float32)
        tensors["pdx_" + name] = np.asarray(
            jax.grad(lambda v: jnp.sum(f(v) * pw))(jnp.asarray(px)), np.float32)
        hm = np.asarray(compute_homography_matrix(t["start_points"], t["end_points"]),
                        np.float32)
        ident = np.asarray([1, 0, 0, 0, 1, 0, 0, 0], np.float32)
        tensors["ph_" + name] = np.where(np.asarray(t["apply_perspective"])[:, None], hm,
                                         ident).astype(np.float32)
        meta["desc_" + name] = (f"{key} {step} {factor[0]} {factor[1]} {scale} "
                                f"{int(interp == 'bilinear')} {fill}")
        print(name, "applied", np.asarray(t["apply_perspective"]))
    save_file(tensors, os.path.join(OUT, "augment_persp.safetensors"), metadata=meta)
    print(f"{len(meta)} cases")


if __name__ == "__main__":
    main()
