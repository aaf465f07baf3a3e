"""Keras 3 references for the mix_up and cut_mix map ops (tests/test_data_mix.c).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_mix.py
Writes tests/ref/mix/mix.safetensors: a batch `x` [4, 5, 6, 3] (uniform in [0, 1)) and its
labels `labels` [4, 3] (two one-hot rows, two soft ones), and per case the random draws
pinned (`lam_<case>` the Beta weights, `perm_<case>` the partners, for CutMix `ux_<case>` and
`uy_<case>` the box's uniform start draws) with Keras's outputs `y_<case>` (images) and
`z_<case>` (labels). Each case runs the layer's own get_random_transformation,
transform_images and transform_labels, with keras's backend random functions (uniform,
beta, shuffle) made to return the pinned draws in the order the layer asks for them: the
box arithmetic, the mask and the label weights are Keras's code.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax.numpy as jnp
import numpy as np
from keras import layers as L
from keras.src.backend.jax import random as jrandom
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mix")
SHAPE = (4, 5, 6, 3)


def pinned(layer, data, draws):
    """The layer's transformation of `data` with backend draws taken from `draws`, a dict
    of function name -> list of arrays returned in call order."""
    saved = {k: getattr(jrandom, k) for k in ("uniform", "beta", "shuffle")}

    def fake(name):
        def f(*args, **kwargs):
            return jnp.asarray(draws[name].pop(0))
        return f

    try:
        for k in saved:
            setattr(jrandom, k, fake(k))
        t = layer.get_random_transformation(data, training=True)
    finally:
        for k, v in saved.items():
            setattr(jrandom, k, v)
    for k, v in draws.items():
        assert not v, f"draws of {k} left over: the layer asked for fewer"
    y = layer.transform_images(data["images"], t, training=True)
    z = layer.transform_labels(data["labels"], t, training=True)
    return np.asarray(y, np.float32), np.asarray(z, np.float32)


def main():
    rng = np.random.default_rng(11)
    x = rng.uniform(size=SHAPE).astype(np.float32)
    labels = np.array([[1, 0, 0], [0, 0, 1], [0.25, 0.5, 0.25], [0.1, 0.9, 0]], np.float32)
    data = {"images": jnp.asarray(x), "labels": jnp.asarray(labels)}
    tensors = {"x": x, "labels": labels}
    f32 = lambda v: np.asarray(v, np.float32)
    mix_cases = {
        "mixup": ([0.3, 0.9, 0.5, 0.05], [2, 0, 3, 1]),
        "mixup_self": ([0.7, 0.2, 0.999, 0.5], [0, 2, 1, 3]),
    }
    for name, (lam, perm) in mix_cases.items():
        layer = L.MixUp(alpha=0.2)
        y, z = pinned(layer, data, {"shuffle": [np.array(perm, np.int64)],
                                    "beta": [f32(lam)]})
        tensors.update({f"lam_{name}": f32(lam), f"perm_{name}": f32(perm),
                        f"y_{name}": y, f"z_{name}": z})
    cut_cases = {
        # box edges fall between pixels
        "cutmix": ([0.3, 0.7, 0.05, 0.95], [0.1, 0.5, 0.99, 0.0], [0.7, 0.2, 0.0, 0.4],
                   [1, 2, 3, 0]),
        # lam 0: the whole image; 1: no box; 0.75: a box 3 pixels wide from 0, its end on a
        # pixel (which the box leaves out)
        "cutmix_edges": ([0.0, 1.0, 0.5, 0.75], [0.0, 0.3, 1.0 - 2**-24, 0.0],
                         [0.999, 0.0, 0.5, 0.25], [3, 3, 0, 2]),
    }
    for name, (lam, ux, uy, perm) in cut_cases.items():
        layer = L.CutMix(factor=1.0)
        y, z = pinned(layer, data, {"uniform": [f32(0.5), f32(ux), f32(uy)],
                                    "beta": [f32(lam)],
                                    "shuffle": [np.array(perm, np.int32)]})
        tensors.update({f"lam_{name}": f32(lam), f"ux_{name}": f32(ux), f"uy_{name}": f32(uy),
                        f"perm_{name}": f32(perm), f"y_{name}": y, f"z_{name}": z})
    os.makedirs(OUT, exist_ok=True)
    save_file(tensors, os.path.join(OUT, "mix.safetensors"),
              metadata={"cases": "mixup mixup_self cutmix cutmix_edges"})
    print("wrote", os.path.join(OUT, "mix.safetensors"), len(tensors), "tensors")


if __name__ == "__main__":
    main()
