"""Keras 3 references for per-pixel losses: semantic segmentation (tests/test_segmentation.c).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_segmentation.py
Writes tests/ref/segmentation/<case>.safetensors for each case below: the weights before
training under tfc's names (`<layer>/<variable>`), one batch's input `x` and per-pixel labels
`labels` (int32 class ids (n, H, W) or (n, H, W, 1), or float32 one-hot (n, H, W, classes)),
Keras's `loss` and `accuracy` of that batch before training (`model.evaluate`: the mean over
every pixel of the batch) and its `mean_iou` (keras.metrics.MeanIoU over the predictions'
argmax), the weights after STEPS updates of SGD on it
(`model.train_on_batch`) under `after/<layer>/<variable>`, and the tfc model YAML in the
metadata (`yaml`) with the solver's `lr` and `steps`. Weights are uniform in [-0.5, 0.5)
from a fixed seed (moving variances in [0.5, 1.5)), inputs uniform in [-1, 1).
"""
import os

import numpy as np
import keras
from keras import layers as L
from safetensors.numpy import save_file

from keras_constraints import named  # {tfc's name: the variable}

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "segmentation")
LR = 0.5
STEPS = 3


def unet():
    """A small U-Net: a skip joined by Concatenate, softmax per pixel, labels (n, H, W)."""
    x = keras.Input((8, 8, 2))
    c1 = L.Conv2D(4, 3, padding="same", activation="relu", name="c1")(x)
    h = L.MaxPooling2D(2, name="p")(c1)
    h = L.Conv2D(6, 3, padding="same", activation="relu", name="c2")(h)
    h = L.Conv2DTranspose(4, 3, strides=2, padding="same", name="up")(h)
    h = L.Concatenate(name="cat")([h, c1])
    y = L.Conv2D(3, 1, activation="softmax", name="out")(h)
    return x, y, "sparse_categorical_crossentropy", "sparse", """input: {shape: [8, 8, 2]}
layers:
  - Conv2D: {name: c1, filters: 4, kernel_size: 3, padding: same, activation: relu}
  - MaxPooling2D: {name: p, pool_size: 2}
  - Conv2D: {name: c2, filters: 6, kernel_size: 3, padding: same, activation: relu}
  - Conv2DTranspose: {name: up, filters: 4, kernel_size: 3, strides: 2, padding: same}
  - Concatenate: {name: cat, inputs: [up, c1]}
  - Conv2D: {name: out, filters: 3, kernel_size: 1, activation: softmax}
loss: sparse_categorical_crossentropy
metrics: [accuracy]
"""


def channel():
    """Labels (n, H, W, 1), as masks read from single-channel images; BatchNormalization."""
    x = keras.Input((6, 5, 3))
    h = L.Conv2D(5, 3, padding="same", name="c")(x)
    h = L.BatchNormalization(name="bn")(h)
    h = L.Activation("relu", name="r")(h)
    y = L.Conv2D(4, 1, activation="softmax", name="out")(h)
    return x, y, "sparse_categorical_crossentropy", "sparse1", """input: {shape: [6, 5, 3]}
layers:
  - Conv2D: {name: c, filters: 5, kernel_size: 3, padding: same}
  - BatchNormalization: {name: bn}
  - Activation: {name: r, activation: relu}
  - Conv2D: {name: out, filters: 4, kernel_size: 1, activation: softmax}
loss: sparse_categorical_crossentropy
metrics: [accuracy]
"""


def logits():
    """One-hot labels (n, H, W, classes) and logits: categorical cross-entropy from_logits."""
    x = keras.Input((5, 6, 1))
    h = L.Conv2D(5, 3, padding="same", activation="tanh", name="c")(x)
    y = L.Conv2D(3, 1, name="out")(h)
    loss = keras.losses.CategoricalCrossentropy(from_logits=True)
    return x, y, loss, "onehot", """input: {shape: [5, 6, 1]}
layers:
  - Conv2D: {name: c, filters: 5, kernel_size: 3, padding: same, activation: tanh}
  - Conv2D: {name: out, filters: 3, kernel_size: 1}
loss: {type: categorical_crossentropy, from_logits: true}
metrics: [accuracy]
"""


CASES = [unet, channel, logits]


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(23)
    for case in CASES:
        inp, out, loss, form, yaml = case()
        model = keras.Model(inp, out)
        model.compile(loss=loss, metrics=["accuracy"],
                      optimizer=keras.optimizers.SGD(learning_rate=LR))
        tensors = {}
        for name, w in named(model).items():
            v = rng.uniform(-0.5, 0.5, w.shape).astype(np.float32)
            if name.endswith("moving_variance"):
                v = rng.uniform(0.5, 1.5, w.shape).astype(np.float32)
            w.assign(v)
            tensors[name] = v
        n = 6
        x = rng.uniform(-1, 1, (n,) + tuple(inp.shape[1:])).astype(np.float32)
        classes = out.shape[-1]
        ids = rng.integers(0, classes, (n,) + tuple(out.shape[1:3])).astype(np.int32)
        labels = {"sparse": ids, "sparse1": ids[..., None],
                  "onehot": np.eye(classes, dtype=np.float32)[ids]}[form]
        loss0, acc0 = model.evaluate(x, labels, batch_size=n, verbose=0)
        iou = keras.metrics.MeanIoU(classes, sparse_y_true=form != "onehot",
                                    sparse_y_pred=False)
        iou.update_state(labels, model.predict(x, batch_size=n, verbose=0))
        iou0 = float(iou.result())
        for _ in range(STEPS):
            model.train_on_batch(x, labels)
        for name, w in named(model).items():
            tensors["after/" + name] = np.asarray(w.value)
        tensors.update(x=x, labels=labels, loss=np.array([loss0], np.float32),
                       accuracy=np.array([acc0], np.float32),
                       mean_iou=np.array([iou0], np.float32))
        save_file(tensors, os.path.join(OUT, case.__name__ + ".safetensors"),
                  metadata={"yaml": yaml, "lr": str(LR), "steps": str(STEPS)})
        print(f"{case.__name__}: loss {loss0:.6f} accuracy {acc0:.6f} mean IoU {iou0:.6f}")


if __name__ == "__main__":
    main()
