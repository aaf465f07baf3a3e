"""Keras 3 references for `trainable: false` (tests/test_trainable.c, keras_steps).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_trainable.py
Writes tests/ref/trainable/<case>.safetensors for each case below: the weights before training
under tfc's names (`<layer>/<variable>`), the input `x` and labels `labels` (int32 class ids) of
one batch, the weights after STEPS updates of SGD with momentum on that batch
(`model.train_on_batch`) under `after/<layer>/<variable>`, and the tfc model YAML in the
metadata (`yaml`) with the solver's `lr`, `momentum` and `steps`. The frozen layers
(trainable=False) sit at the front, in the middle and inside a wrapper; a frozen layer's
weight regularizer adds nothing (Keras regularizes trainable weights only) and a frozen
BatchNormalization normalizes with its moving statistics in training too, leaving them as
they are. Weights are uniform in [-0.5, 0.5) from a fixed seed (moving variances in
[0.5, 1.5)), inputs uniform in [-1, 1) or token ids in [1, 12).
"""
import os

import numpy as np
import keras
from keras import layers as L
from keras import regularizers as R
from safetensors.numpy import save_file

from keras_constraints import named  # {tfc's name: the variable}

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainable")
LR = 0.1
MOMENTUM = 0.9
STEPS = 3


def image():
    x = keras.Input((6, 6, 2))
    h = L.Conv2D(3, 3, kernel_regularizer=R.L2(0.5), trainable=False, name="c")(x)
    h = L.BatchNormalization(trainable=False, name="bn")(h)
    h = L.Activation("relu", name="r")(h)
    h = L.Conv2D(4, 2, name="c2")(h)
    h = L.BatchNormalization(name="bn2")(h)
    h = L.Flatten(name="f")(h)
    h = L.Dense(8, activation="tanh", trainable=False, name="d")(h)
    y = L.Dense(4, activation="softmax", name="out")(h)
    return x, y, 4, """input: {shape: [6, 6, 2]}
layers:
  - Conv2D: {name: c, filters: 3, kernel_size: 3, kernel_regularizer: {l2: 0.5}, trainable: false}
  - BatchNormalization: {name: bn, trainable: False}
  - Activation: {name: r, activation: relu}
  - Conv2D: {name: c2, filters: 4, kernel_size: 2}
  - BatchNormalization: {name: bn2, trainable: true}
  - Flatten: {name: f}
  - Dense: {name: d, units: 8, activation: tanh, trainable: false}
  - Dense: {name: out, units: 4, activation: softmax}
loss: sparse_categorical_crossentropy
"""


def sequence():
    x = keras.Input((5,), dtype="int32")
    h = L.Embedding(12, 4, trainable=False, name="e")(x)
    h = L.Bidirectional(L.GRU(3, return_sequences=True), trainable=False, name="bi")(h)
    h = L.LSTM(4, name="lstm")(h)
    y = L.Dense(3, activation="softmax", name="out")(h)
    return x, y, 3, """input: {shape: [5], dtype: int32}
layers:
  - Embedding: {name: e, input_dim: 12, output_dim: 4, trainable: false}
  - Bidirectional: {name: bi, layer: {GRU: {units: 3, return_sequences: true}}, trainable: false}
  - LSTM: {name: lstm, units: 4}
  - Dense: {name: out, units: 3, activation: softmax}
loss: sparse_categorical_crossentropy
"""


CASES = [image, sequence]


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(17)
    for case in CASES:
        inp, out, classes, yaml = case()
        model = keras.Model(inp, out)
        for layer in model.layers:
            # Keras 3.15's wrappers take trainable=False in their constructor without passing
            # it on to the layers they wrap (whose weights then train); the attribute set
            # after construction freezes them, as tfc's argument does (docs/layers.md)
            if isinstance(layer, L.Bidirectional) and layer.name == "bi":
                layer.trainable = False
        model.compile(loss="sparse_categorical_crossentropy",
                      optimizer=keras.optimizers.SGD(learning_rate=LR, momentum=MOMENTUM))
        tensors = {}
        for name, w in named(model).items():
            v = rng.uniform(-0.5, 0.5, w.shape).astype(np.float32)
            if name.endswith("moving_variance"):
                v = rng.uniform(0.5, 1.5, w.shape).astype(np.float32)
            w.assign(v)
            tensors[name] = v
        n = 8
        if inp.dtype == "int32":
            x = rng.integers(1, 12, (n,) + tuple(inp.shape[1:])).astype(np.int32)
        else:
            x = rng.uniform(-1, 1, (n,) + tuple(inp.shape[1:])).astype(np.float32)
        labels = rng.integers(0, classes, (n,)).astype(np.int32)
        for _ in range(STEPS):
            model.train_on_batch(x, labels)
        moved, frozen = [], []
        for name, w in named(model).items():
            v = np.asarray(w.value)
            tensors["after/" + name] = v
            (frozen if np.array_equal(v, tensors[name]) else moved).append(name)
        tensors.update(x=x, labels=labels)
        save_file(tensors, os.path.join(OUT, case.__name__ + ".safetensors"),
                  metadata={"yaml": yaml, "lr": str(LR), "momentum": str(MOMENTUM),
                            "steps": str(STEPS)})
        print(f"{case.__name__}: moved {moved}\n  unchanged {frozen}")


if __name__ == "__main__":
    main()
