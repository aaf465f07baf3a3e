"""Keras 3 references for RandomShear and the region layers (tests/test_augment_region.c).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_augment_region.py
Writes tests/ref/augment_region/augment_region.safetensors: the input `x` [2, 6, 7, 3]
(uniform in [0, 1)), the weights `w` of the loss sum(y w) whose input gradient is compared,
and per case its tfc YAML (metadata `yaml_<case>`), Keras's output `y_<case>` and input
gradient `dx_<case>`. A case's random draw is pinned: where Keras draws something a range
cannot fix (RandomShear's sign), the case is written once per outcome, `y_<case>`,
`y_<case>~1` (and their `dx_`), and each tfc image must match one of them. RandomErasing's
corner has many outcomes: its cases hold Keras's fill `fill_<case>` [2, 6, 7, 3] and each
distinct mask `mask_<case>~<j>` [6, 7] (1: erased) its layer makes, and y = where(mask,
fill, x) is Keras's transform_images (checked here for every mask).
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import numpy as np
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "augment_region")
FILLS = ["reflect", "wrap", "constant", "nearest"]
INTERPOLATIONS = ["nearest", "bilinear"]
SHAPE = (2, 6, 7, 3)


def shear_cases():
    """RandomShear with both ranges single points: its matrix is fixed up to the sign Keras
    draws per image (u > 1/2 negates both factors); the transform applied with that sign
    given, through the layer's own transform_images."""
    for fill in FILLS:
        for interp in INTERPOLATIONS:
            kx, ky = 0.45, 0.35
            layer = L.RandomShear(x_factor=(kx, kx), y_factor=(ky, ky), fill_mode=fill,
                                  interpolation=interp, fill_value=0.25)
            yaml = (f"RandomShear: {{x_factor: [{kx}, {kx}], y_factor: [{ky}, {ky}], "
                    f"fill_mode: {fill}, interpolation: {interp}, fill_value: 0.25}}")
            yield f"shear_{fill}_{interp}", layer, yaml, (kx, ky)
    layer = L.RandomShear(x_factor=(0.6, 0.6))
    yield "shear_x", layer, "RandomShear: {x_factor: [0.6, 0.6]}", (0.6, 0.0)
    layer = L.RandomShear(y_factor=(0.8, 0.8), fill_mode="constant")
    yield ("shear_y", layer, "RandomShear: {y_factor: [0.8, 0.8], fill_mode: constant}",
           (0.0, 0.8))


def shear_outcomes(layer, k):
    """RandomShear's two outcomes: the factors (kx, ky) and their negation."""
    kx, ky = k
    for sign in (1.0, -1.0):
        sf = jnp.asarray([[kx * sign, ky * sign]] * SHAPE[0], jnp.float32)
        t = {"shear_factor": sf, "input_shape": SHAPE}
        yield lambda v, t=t: layer.transform_images(v, t, training=True)


def blur_outcomes(layer, sigmas):
    """RandomGaussianBlur applied to every image (factor [1, 1]) with its batch's sigmas
    pinned (a range [s, s]; the pair (sx, sy) given here), through transform_images: one
    outcome."""
    n = SHAPE[0]
    t = {"should_apply_blur": jnp.ones((n,), bool),
         "blur_factor": jnp.asarray(sigmas, jnp.float32) + 1e-6}
    yield lambda v, t=t: layer.transform_images(v, t, training=True)


def blur_cases():
    """Kernel sizes 3 and [5, 3] (width 5, height 3), sigmas pinned, the clip active; and
    factor [0, 0] (never blurred: the clip alone)."""
    yield ("blur_3", L.RandomGaussianBlur(factor=(1.0, 1.0), sigma=(0.8, 0.8),
                                          value_range=(0.1, 0.7)),
           "RandomGaussianBlur: {factor: [1, 1], sigma: [0.8, 0.8], value_range: [0.1, 0.7]}",
           (0.8, 0.8))
    yield ("blur_5x3", L.RandomGaussianBlur(factor=(1.0, 1.0), kernel_size=(5, 3),
                                            sigma=(0.6, 0.6), value_range=(0, 1)),
           "RandomGaussianBlur: {factor: [1, 1], kernel_size: [5, 3], sigma: [0.6, 0.6], "
           "value_range: [0, 1]}", (0.6, 0.6))
    yield ("blur_none", L.RandomGaussianBlur(factor=(0.0, 0.0), value_range=(0.2, 0.9)),
           "RandomGaussianBlur: {factor: [0, 0], value_range: [0.2, 0.9]}", None)


def erasing_cases():
    """RandomErasing with factor [1, 1] (every image erased) or [0, 0] (none) and scale a
    single point, so the rectangle's size is fixed; its corner (x0, y0) = (u (w - lx),
    v (h - ly)) is the draw a range cannot pin, so every distinct mask over a fine grid of
    (u, v) is an outcome, each through the layer's own _generate_batch_mask and
    transform_images. The fills: a number, three per channel, clipped by value_range (Keras
    3.15 on JAX refuses three values in its call: jnp.full_like takes no list; the case
    applies the per-channel fill the argument documents)."""
    yield ("erasing_const", L.RandomErasing(factor=(1.0, 1.0), scale=(0.3, 0.3),
                                           fill_value=0.4, value_range=(0, 1)),
           "RandomErasing: {factor: [1, 1], scale: [0.3, 0.3], fill_value: 0.4, "
           "value_range: [0, 1]}")
    yield ("erasing_channels", L.RandomErasing(factor=(1.0, 1.0), scale=(0.5, 0.5),
                                              fill_value=[0.1, 2.0, -3.0],
                                              value_range=(-1, 1)),
           "RandomErasing: {factor: [1, 1], scale: [0.5, 0.5], fill_value: [0.1, 2.0, -3.0], "
           "value_range: [-1, 1]}")
    yield ("erasing_all", L.RandomErasing(factor=(1.0, 1.0), scale=(1.0, 1.0),
                                         fill_value=7.0),
           "RandomErasing: {factor: [1, 1], scale: [1, 1], fill_value: 7}")
    yield ("erasing_none", L.RandomErasing(factor=(0.0, 0.0), fill_value=0.5),
           "RandomErasing: {factor: [0, 0], fill_value: 0.5}")


def erasing_masks(layer):
    """Keras's fill for the case, and every distinct mask over a fine grid of corners (y of
    each checked against where(mask, fill, x))."""
    shape = SHAPE
    n, h, w = shape[0], shape[1], shape[2]
    if isinstance(layer.fill_value, (tuple, list)):
        # Keras's own jnp.full_like refuses a list on JAX (a TypeError in 3.15): the
        # per-channel fill it means, clipped as _get_fill_value clips it
        fill = jnp.clip(jnp.broadcast_to(jnp.asarray(list(layer.fill_value), jnp.float32),
                                         shape), layer.value_range[0], layer.value_range[1])
    else:
        fill = layer._get_fill_value(jnp.zeros(shape, jnp.float32), shape, None)
    masks = []
    if layer.factor[1] == 0:  # never erased
        return fill, [np.zeros((h, w), np.float32)]
    s = np.float32(layer.scale[0])
    r = np.sqrt(np.asarray([s, s], np.float32))
    lx, ly = np.float32(r[0] * np.float32(w)), np.float32(r[1] * np.float32(h))
    seen = set()
    for u in np.linspace(0, 1, 97, dtype=np.float32):
        for v in np.linspace(0, 1, 97, dtype=np.float32):
            x0 = np.float32(u * (np.float32(w) - lx))
            y0 = np.float32(v * (np.float32(h) - ly))
            box = tuple(jnp.full((n,), b, jnp.float32) for b in (x0, x0 + lx, y0, y0 + ly))
            mask = layer._generate_batch_mask(shape, box)
            key = np.asarray(mask).tobytes()
            if key in seen:
                continue
            seen.add(key)
            t = {"apply_erasing": jnp.ones((n,), bool), "batch_masks": mask,
                 "fill_value": fill}
            xs = jnp.asarray(np.random.default_rng(1).uniform(0, 1, shape), jnp.float32)
            y = layer.transform_images(xs, t, training=True)
            assert np.array_equal(np.asarray(y), np.where(np.asarray(mask), fill, xs))
            masks.append(np.asarray(mask)[0, :, :, 0].astype(np.float32))
    return fill, masks


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, SHAPE).astype(np.float32)
    w = rng.uniform(-1, 1, SHAPE).astype(np.float32)
    tensors, meta = {"x": x, "w": w}, {}
    cases = [(name, yaml, shear_outcomes(layer, k)) for name, layer, yaml, k in shear_cases()]
    for name, layer, yaml, sig in blur_cases():
        if sig is None:  # never blurred: the clip alone, through the layer's call
            cases.append((name, yaml, [lambda v, layer=layer: layer(v, training=True)]))
        else:
            cases.append((name, yaml, blur_outcomes(layer, sig)))
    for name, yaml, outcomes in cases:
        for j, f in enumerate(outcomes):
            suffix = f"~{j}" if j else ""
            y = f(jnp.asarray(x))
            dx = jax.grad(lambda v: jnp.sum(f(v) * w))(jnp.asarray(x))
            tensors["y_" + name + suffix] = np.asarray(y, np.float32)
            tensors["dx_" + name + suffix] = np.asarray(dx, np.float32)
        meta["yaml_" + name] = f"input: {{shape: {list(SHAPE[1:])}}}\nlayers:\n  - {yaml}\n"
    for name, layer, yaml in erasing_cases():
        fill, masks = erasing_masks(layer)
        tensors["fill_" + name] = np.asarray(fill, np.float32)
        for j, m in enumerate(masks):
            tensors[f"mask_{name}~{j}"] = m
        meta["yaml_" + name] = f"input: {{shape: {list(SHAPE[1:])}}}\nlayers:\n  - {yaml}\n"
    save_file(tensors, os.path.join(OUT, "augment_region.safetensors"), metadata=meta)
    print(f"{len(meta)} cases")


if __name__ == "__main__":
    main()
