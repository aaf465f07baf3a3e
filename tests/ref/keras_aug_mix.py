"""Keras 3 references for AugMix (tests/test_aug_mix.c, parity_keras).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_aug_mix.py
Each case is keras.layers.AugMix's own transform_images with a transformation given: the
chains' operations (Keras's list, AUGMENT_LAYERS_ALL order), the chain mixing weights and the
weight sample, and a factor [f, f] that fixes every draw of the operations picked (as
tests/ref/keras_rand_augment.py: translation, rotation, brightness, colour degeneration and
sharpness [f, f], posterization f = 0.2: 1 bit, solarization f = 0: 255 - x, the tone layers
no draw). RandomShear's sign is drawn per image: its case has both outputs, y_shear_pos and
y_shear_neg. Metadata: yaml_<case> (the tfc layer), picks_<case> (tfc's slots: per chain
chain_depth picks, -1 a skipped slot, chains separated by "|"), x_<case> (the input);
tensors m_<case> (chain weights) and w_<case> (weight sample). The clip case's input
overshoots value_range so that the final clip binds. Writes tests/ref/aug_mix/aug_mix.safetensors.
"""
import os

import numpy as np
import keras
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aug_mix")

# name, factor, chains (tfc slots), weights, weight sample, interpolation, value_range, input
CASES = [
    ("two_chains", 0.3, [[1, -1, 5], [7, -1, -1]], [0.7, 0.3], 0.25, "bilinear",
     (0, 255), "x255"),
    ("empty_chain", 0.2, [[2, 6, 10], [-1, -1, -1], [3, -1, -1]], [0.5, 0.2, 0.3], 0.6,
     "bilinear", (0, 255), "x255"),
    ("solarization", 0.0, [[4], [5]], [0.4, 0.6], 0.1, "bilinear", (0, 255), "x255"),
    ("twice", 0.3, [[7, 7, 1], [8, -1, 2]], [0.45, 0.55], 0.35, "nearest", (0, 255), "x255"),
    ("unit_range", 0.25, [[8, 10, 5], [-1, 2, -1]], [0.35, 0.65], 0.5, "nearest", (-1, 1),
     "x1"),
    ("clip", 0.3, [[1], [7]], [0.5, 0.5], 0.5, "bilinear", (0, 255), "xwide"),
    ("basic_ops", 0.3, [[6, 1], [5, 2]], [0.8, 0.2], 0.3, "bilinear", (0, 255), "x255"),
]


def transformation(layer, x, chains, m, w, shear_sign=0):
    chain_transforms = []
    for chain in chains:
        ts = []
        for k in chain:
            if k < 0:
                continue
            name = layer._augment_layers[k]
            t = getattr(layer, name).get_random_transformation(x, training=True)
            if name == "random_shear" and shear_sign:
                t = dict(t, shear_factor=shear_sign * np.abs(np.asarray(t["shear_factor"])))
            ts.append({"layer_name": name, "transformation": t})
        chain_transforms.append(ts)
    return {"chain_mixing_weights": np.asarray(m, np.float32),
            "weight_sample": np.float32(w), "chain_transforms": chain_transforms}


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(8)
    inputs = {"x255": rng.uniform(0, 255, (2, 6, 7, 3)).astype(np.float32),
              "x1": rng.uniform(-1, 1, (2, 6, 7, 3)).astype(np.float32),
              "xwide": rng.uniform(-60, 320, (2, 6, 7, 3)).astype(np.float32)}
    tensors, meta = dict(inputs), {}
    for name, f, chains, m, w, interp, vr, xname in CASES:
        x = inputs[xname]
        depth = len(chains[0])
        all_ops = name != "basic_ops"
        layer = L.AugMix(value_range=vr, num_chains=len(chains), chain_depth=depth,
                         factor=(f, f), interpolation=interp, all_ops=all_ops)
        y = layer.transform_images(x, transformation(layer, x, chains, m, w), training=True)
        tensors["y_" + name] = np.asarray(y, dtype=np.float32)
        tensors["m_" + name] = np.asarray(m, np.float32)
        tensors["w_" + name] = np.asarray([w], np.float32)
        meta["yaml_" + name] = (f"AugMix: {{value_range: [{vr[0]}, {vr[1]}], "
                                f"num_chains: {len(chains)}, chain_depth: {depth}, "
                                f"factor: [{f}, {f}], interpolation: {interp}"
                                + ("" if all_ops else ", all_ops: false") + "}")
        meta["picks_" + name] = " | ".join(" ".join(str(k) for k in c) for c in chains)
        meta["x_" + name] = xname
    layer = L.AugMix(num_chains=1, chain_depth=1, factor=(0.2, 0.2))
    x = inputs["x255"]
    for sign, tag in ((1, "pos"), (-1, "neg")):
        t = transformation(layer, x, [[0]], [1.0], 0.3, sign)
        y = layer.transform_images(x, t, training=True)
        tensors["y_shear_" + tag] = np.asarray(y, dtype=np.float32)
    tensors["m_shear"] = np.asarray([1.0], np.float32)
    tensors["w_shear"] = np.asarray([0.3], np.float32)
    meta["yaml_shear"] = "AugMix: {num_chains: 1, chain_depth: 1, factor: [0.2, 0.2]}"
    meta["picks_shear"] = "0"
    meta["x_shear"] = "x255"
    # inference: the identity (the default layer, called with training=False)
    tensors["y_inference"] = np.asarray(L.AugMix()(x, training=False), dtype=np.float32)
    save_file(tensors, os.path.join(OUT, "aug_mix.safetensors"), metadata=meta)
    print(f"{len(CASES) + 2} cases, keras {keras.__version__}")


if __name__ == "__main__":
    main()
