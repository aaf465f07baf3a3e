"""Keras 3 references for the colour augmentation layers (tests/test_augment_color.c).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_color.py
Each case is a Keras layer whose draw is fixed: a range of one value (RandomInvert's factor
[1, 1], RandomPosterization's (3, 3), ...), RandomGrayscale's factor 1 or 0, or a
transformation handed to the layer's transform_images (Solarization's addition and threshold,
which Keras draws from [lower, upper * 255] and so cannot pin but at 0; RandomHue's shift,
whose sign is drawn: +f / 2 for image 0, -f / 2 for image 1). For case <c>:
  x_<c>, dy_<c>     the input [2, 3, 4, channels] and an output gradient
  y_<c>             transform_images(x) in training
  dx_<c>            its vector-Jacobian product with dy (jax.vjp)
  yaml_<c>          (metadata, when the draw is the layer's own) the tfc layer's model
  desc_<c>          (metadata) the tfc_color_desc fixing the same transform, for the op:
                    "kind lo0 hi0 lo1 hi1 vlo vhi" (core/backend.h's tfc_color_kind)
Writes tests/ref/color/color.safetensors.
"""
import os

import jax
import jax.numpy as jnp
import numpy as np
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "color")
GRAY, INVERT, SOLARIZE, POSTERIZE, DEGENERATE, SATURATE, HUE = range(7)


def cases():
    """(name, layer, transformation or None, tfc yaml or None, desc, value range, channels)"""
    yield ("grayscale_on", L.RandomGrayscale(1.0), None, "RandomGrayscale: {factor: 1.0}",
           (GRAY, 1, 1, 0, 0, 0, 255), (0, 255), 3)
    yield ("grayscale_off", L.RandomGrayscale(0.0), None, "RandomGrayscale: {factor: 0}",
           (GRAY, 0, 0, 0, 0, 0, 255), (0, 255), 3)
    yield ("grayscale_one_channel", L.RandomGrayscale(1.0), None,
           "RandomGrayscale: {factor: 1.0}", (GRAY, 1, 1, 0, 0, 0, 255), (0, 255), 1)
    yield ("invert_on", L.RandomInvert((1.0, 1.0)), None, "RandomInvert: {factor: [1, 1]}",
           (INVERT, 1, 1, 0, 0, 0, 255), (0, 255), 3)
    yield ("invert_range", L.RandomInvert((1.0, 1.0), value_range=(-1, 2)), None,
           "RandomInvert: {factor: [1, 1], value_range: [-1, 2]}",
           (INVERT, 1, 1, 0, 0, -1, 2), (-1, 2), 3)
    yield ("invert_off", L.RandomInvert((0.0, 0.0)), None, "RandomInvert: {factor: [0, 0]}",
           (INVERT, 0, 0, 0, 0, 0, 255), (0, 255), 3)
    yield ("solarize_default", L.Solarization(), None, "Solarization: {}",
           (SOLARIZE, 0, 0, 0, 0, 0, 255), (0, 255), 3)
    yield ("solarize_range", L.Solarization(value_range=(1, -1)), None,
           "Solarization: {value_range: [1, -1]}", (SOLARIZE, 0, 0, 0, 0, -1, 1), (-1, 1), 3)
    for name, a, t, vr in [("solarize_add_thresh", 40.0, 128.0, (0, 255)),
                           ("solarize_add_thresh_range", 70.0, 100.0, (-1, 1))]:
        full = np.full((2, 1, 1, 1), 0, np.float32)
        yield (name, L.Solarization(value_range=vr),
               {"additions": full + a, "thresholds": full + t}, None,
               (SOLARIZE, a, a, t, t) + vr, vr, 3)
    yield ("posterize_3", L.RandomPosterization((3, 3)), None,
           "RandomPosterization: {factor: [3, 3]}", (POSTERIZE, 3, 3, 0, 0, 0, 255), (0, 255), 3)
    yield ("posterize_range", L.RandomPosterization((5, 5), value_range=(0, 1)), None,
           "RandomPosterization: {factor: [5, 5], value_range: [0, 1]}",
           (POSTERIZE, 5, 5, 0, 0, 0, 1), (0, 1), 3)
    yield ("degenerate", L.RandomColorDegeneration((0.4, 0.4)), None,
           "RandomColorDegeneration: {factor: [0.4, 0.4]}",
           (DEGENERATE, 0.4, 0.4, 0, 0, 0, 255), (0, 255), 3)
    yield ("degenerate_clip", L.RandomColorDegeneration((-0.7, -0.7), value_range=(200, 20)),
           None, "RandomColorDegeneration: {factor: [-0.7, -0.7], value_range: [200, 20]}",
           (DEGENERATE, -0.7, -0.7, 0, 0, 20, 200), (20, 200), 3)
    yield ("degenerate_one_channel", L.RandomColorDegeneration((0.5, 0.5)), None,
           "RandomColorDegeneration: {factor: [0.5, 0.5]}",
           (DEGENERATE, 0.5, 0.5, 0, 0, 0, 255), (0, 255), 1)
    yield ("saturation", L.RandomSaturation((0.3, 0.3)), None,
           "RandomSaturation: {factor: [0.3, 0.3]}", (SATURATE, 0.3, 0.3, 0, 0, 0, 255),
           (0, 255), 3)
    yield ("saturation_clip", L.RandomSaturation((0.8, 0.8), value_range=(1, 0)), None,
           "RandomSaturation: {factor: [0.8, 0.8], value_range: [1, 0]}",
           (SATURATE, 0.8, 0.8, 0, 0, 0, 1), (0, 1), 3)
    yield ("saturation_negative", L.RandomSaturation((-0.5, -0.5)), None,
           "RandomSaturation: {factor: [-0.5, -0.5]}", (SATURATE, -0.5, -0.5, 0, 0, 0, 255),
           (0, 255), 3)
    yield ("hue_zero", L.RandomHue((0.0, 0.0)), None, "RandomHue: {factor: [0, 0]}",
           (HUE, 0, 0, 0, 0, 0, 255), (0, 255), 3)
    # the sign of the shift is drawn: image 0 +f / 2, image 1 -f / 2 (the test picks a tfc
    # stream that draws those signs)
    for name, f, vr in [("hue_shift", 0.4, (0, 255)), ("hue_shift_range", 0.7, (-1, 1)),
                        ("hue_shift_unit", 0.9, (0, 1))]:
        yield (name, L.RandomHue(f, value_range=vr),
               {"factor": np.array([f * 0.5, -f * 0.5], np.float32)}, None,
               (HUE, f, f, 0, 0) + vr, vr, 3)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    tensors, meta = {}, {}
    for name, layer, tr, yaml, desc, vr, c in cases():
        lo, hi = min(vr), max(vr)
        w = hi - lo
        # values across the range and a little beyond it, so that the clips act
        x = rng.uniform(lo - 0.05 * w, hi + 0.05 * w, (2, 3, 4, c)).astype(np.float32)
        dy = rng.uniform(-1, 1, x.shape).astype(np.float32)
        if tr is None:
            tr = layer.get_random_transformation(x, training=True)
        f = lambda z: layer.transform_images(z, tr, training=True)
        y, vjp = jax.vjp(f, jnp.asarray(x))
        (dx,) = vjp(jnp.asarray(dy))
        tensors.update({"x_" + name: x, "dy_" + name: dy,
                        "y_" + name: np.asarray(y, np.float32),
                        "dx_" + name: np.asarray(dx, np.float32)})
        if yaml:
            meta["yaml_" + name] = f"input: {{shape: [3, 4, {c}]}}\nlayers:\n  - {yaml}\n"
        meta["desc_" + name] = " ".join(repr(float(v)) for v in desc)
    # RandomColorJitter with every stage's draw fixed (contrast [-f, f] is the factor 1 + f,
    # hue [0, 0] no shift): its output alone, as `jitter_<c>` (the YAML)
    for name, kw, yaml, vr in [
            ("jitter_all", dict(brightness_factor=(0.1, 0.1), contrast_factor=(-0.2, 0.2),
                                saturation_factor=(0.3, 0.3), hue_factor=(0.0, 0.0)),
             "brightness_factor: [0.1, 0.1], contrast_factor: [-0.2, 0.2], "
             "saturation_factor: [0.3, 0.3], hue_factor: [0, 0]", (0, 255)),
            ("jitter_some", dict(contrast_factor=(-0.5, 0.5), saturation_factor=(0.7, 0.7),
                                 value_range=(0, 1)),
             "contrast_factor: [-0.5, 0.5], saturation_factor: [0.7, 0.7], value_range: [0, 1]",
             (0, 1))]:
        lo, hi = vr
        x = rng.uniform(lo, hi, (2, 3, 4, 3)).astype(np.float32)
        layer = L.RandomColorJitter(**kw)
        tensors["x_" + name] = x
        tensors["y_" + name] = np.asarray(layer(x, training=True), np.float32)
        meta["jitter_" + name] = (f"input: {{shape: [3, 4, 3]}}\nlayers:\n"
                                  f"  - RandomColorJitter: {{{yaml}}}\n")
    save_file(tensors, os.path.join(OUT, "color.safetensors"), metadata=meta)
    print(f"{len(meta)} cases")


if __name__ == "__main__":
    main()
