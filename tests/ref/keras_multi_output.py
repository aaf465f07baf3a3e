#!/usr/bin/env python3
"""Keras 3 functional models of several outputs, saved as a Keras user saves them, for tfc's
multi-output tests (tests/test_multi_output.c).

Each case builds a model with Keras's own API, perturbs its weights away from their initial
values (keras_import.perturb) and writes into tests/ref/multi_output/:
  CASE.keras        model.save()
  CASE.xK.npy       input K's examples, K in the model's input order (model.inputs)
  CASE.yK.npy       Keras's model.predict on them: output K, in the model's output order
                    (model.outputs), float32
  CASE.tK.npy       output K's labels (int32 class ids for a sparse cross-entropy, float32
                    targets of the output's shape otherwise)
  CASE.compiled.keras  the same model and weights, compiled as below (its compile_config)
  CASE.after.safetensors  every variable under after/ + tfc's name (keras_import.expected) after
                    STEPS model.train_on_batch steps of plain SGD (learning rate LR) on that
                    batch, compiled with the case's losses, loss_weights and metrics, the
                    labels as a dict by output name, from the saved weights (metadata: lr,
                    steps, and `evaluate`: Keras's model.evaluate on the saved weights as
                    JSON, the logs' loss, OUTPUT_loss and OUTPUT_METRIC)

Cases (losses as Keras's compile takes them, written into the model file by the test):
  heads      one input; a shared trunk, an auxiliary softmax head read off its middle and a
             regression head at the end, listed [main, aux] (the last layer first); mse and
             sparse_categorical_crossentropy, loss_weights {main: 1, aux: 0.3}, metrics
             {main: [mae], aux: [accuracy]}
  cnn_heads  one image input; Conv2D -> BatchNormalization -> ReLU -> Flatten -> Dense, with
             the BatchNormalization's and the Flatten's outputs outputs too, listed
             [cls, bn, flat]: outputs inside what tfc's inference fuses or aliases, whose
             gradients meet their readers'; losses [sparse_categorical_crossentropy, mse,
             mae], loss_weights [1, 0.1, 0.05]
  two_tower  inputs [a (float32), c (int32 ids, 0 pads)]: a Dense of a, an LSTM over a masked
             Embedding of c, joined into a Dense `joint` that is an output and is read by the
             last layer, the other output; listed [joint, final]; mse and binary_crossentropy
             (the sigmoid folded), loss_weights {joint: 0.5, final: 1}, metrics {final:
             [binary_accuracy]}
Not run by `make test` (Keras is not a CI dependency). To regenerate (Keras 3.15.1, JAX, CPU):
  KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_multi_output.py
"""
import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from keras_import import expected, perturb  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

OUT = os.path.join(HERE, "multi_output")
L = keras.layers
N = 5
LR = 0.1
STEPS = 3


def heads(rng):
    x = keras.Input((6,), name="x")
    h = L.Dense(8, activation="relu", name="trunk")(x)
    aux = L.Dense(3, activation="softmax", name="aux")(h)
    g = L.Dense(5, activation="tanh", name="deep")(h)
    main = L.Dense(2, name="main")(g)
    return keras.Model(x, [main, aux]), [rng.normal(size=(N, 6)).astype(np.float32)]


heads.compile = dict(loss={"main": "mse", "aux": "sparse_categorical_crossentropy"},
                     loss_weights={"main": 1.0, "aux": 0.3},
                     metrics={"main": ["mae"], "aux": ["accuracy"]})


def cnn_heads(rng):
    x = keras.Input((5, 5, 2), name="image")
    c = L.Conv2D(4, 3, padding="same", name="conv")(x)
    bn = L.BatchNormalization(name="bn")(c)
    r = L.ReLU(name="relu")(bn)
    flat = L.Flatten(name="flat")(r)
    cls = L.Dense(3, activation="softmax", name="cls")(flat)
    return keras.Model(x, [cls, bn, flat]), [rng.normal(size=(N, 5, 5, 2)).astype(np.float32)]


cnn_heads.compile = dict(loss=["sparse_categorical_crossentropy", "mse", "mae"],
                         loss_weights=[1.0, 0.1, 0.05])


def two_tower(rng):
    a = keras.Input((4,), name="a")
    c = keras.Input((5,), dtype="int32", name="c")
    ta = L.Dense(6, activation="tanh")(a)
    seq = L.LSTM(3)(L.Embedding(9, 2, mask_zero=True)(c))
    joint = L.Dense(4, name="joint")(L.Concatenate()([ta, seq]))
    final = L.Dense(2, activation="sigmoid", name="final")(joint)
    ids = rng.integers(1, 9, size=(N, 5)).astype(np.int32)
    for i in range(N):
        ids[i, 5 - i:] = 0
    return keras.Model([a, c], [joint, final]), [rng.normal(size=(N, 4)).astype(np.float32),
                                                 ids]


two_tower.compile = dict(loss={"joint": "mse", "final": "binary_crossentropy"},
                         loss_weights={"joint": 0.5, "final": 1.0},
                         metrics={"final": ["binary_accuracy"]})


def targets(model, ys, rng):
    """Labels for each output: class ids for a sparse cross-entropy, 0/1 for a binary one,
    else normal targets of the output's shape."""
    out = []
    for name, y in zip(model.output_names, ys):
        loss = spec_of(model, name)
        if loss == "sparse_categorical_crossentropy":
            out.append(rng.integers(0, y.shape[-1], size=y.shape[:-1]).astype(np.int32))
        elif loss == "binary_crossentropy":
            out.append(rng.integers(0, 2, size=y.shape).astype(np.float32))
        else:
            out.append(rng.normal(size=y.shape).astype(np.float32))
    return out


def spec_of(model, name):
    """The loss the case compiles output `name` with."""
    loss = model._case_compile["loss"]
    return loss[name] if isinstance(loss, dict) else loss[model.output_names.index(name)]


CASES = [heads, cnn_heads, two_tower]


def main():
    os.makedirs(OUT, exist_ok=True)
    for k, case in enumerate(CASES):
        keras.utils.clear_session()
        keras.utils.set_random_seed(5000 + k)
        rng = np.random.default_rng(5000 + k)
        model, xs = case(rng)
        perturb(model, rng)
        name = case.__name__
        path = os.path.join(OUT, name)
        ys = [np.asarray(y, dtype=np.float32) for y in model.predict(xs, verbose=0)]
        assert len(ys) == len(model.outputs) > 1, name
        for y in ys:
            assert np.all(np.isfinite(y)) and np.std(y) > 1e-3, name
        model.save(path + ".keras")
        for i, x in enumerate(xs):
            np.save("%s.x%d.npy" % (path, i), x)
        for i, y in enumerate(ys):
            np.save("%s.y%d.npy" % (path, i), y)
        loaded = keras.saving.load_model(path + ".keras")
        for y, z in zip(ys, loaded.predict(xs, verbose=0)):
            assert float(np.max(np.abs(np.asarray(z) - y))) == 0, name
        # training: the labels as a dict by output name, as fit(x, {"main": ..., ...})
        model._case_compile = case.compile
        ts = targets(model, ys, rng)
        for i, t in enumerate(ts):
            np.save("%s.t%d.npy" % (path, i), t)
        model.compile(optimizer=keras.optimizers.SGD(LR), **case.compile)
        model.save(path + ".compiled.keras")
        named = dict(zip(model.output_names, ts))
        logs = model.evaluate(xs, named, batch_size=N, return_dict=True, verbose=0)
        for _ in range(STEPS):
            model.train_on_batch(xs, named)
        save_file({"after/" + k: v for k, v in expected(model).items()},
                  path + ".after.safetensors",
                  metadata={"lr": str(LR), "steps": str(STEPS),
                            "evaluate": json.dumps({k: float(v) for k, v in logs.items()})})
        print("%-10s inputs %s -> %s, %s" % (name, [x.shape for x in xs], [y.shape for y in ys],
                                             {k: round(float(v), 4) for k, v in logs.items()}))


if __name__ == "__main__":
    main()
