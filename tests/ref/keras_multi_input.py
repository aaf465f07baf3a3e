#!/usr/bin/env python3
"""Keras 3 functional models of several inputs, saved as a Keras user saves them, for tfc's
multi-input tests (tests/test_multi_input.c).

Each case builds a model with Keras's own API, perturbs its weights away from their initial
values (keras_import.perturb) and writes into tests/ref/multi_input/:
  CASE.keras        model.save()
  CASE.xK.npy       input K's examples, K in the model's input order (model.inputs)
  CASE.y.npy        Keras's model.predict on them, the inputs as a list (float32)
  CASE.labels.npy   int32 class ids of those examples
  CASE.after.safetensors  every variable under after/ + tfc's name (keras_import.expected) after
                    STEPS model.train_on_batch steps of plain SGD (learning rate LR) on that
                    batch, the inputs as a dict by name, from the saved weights (metadata:
                    lr, steps)

Cases:
  wide_deep  inputs [title (int32 ids, 0 pads; Embedding mask_zero), stats (float32)]: a
             masked average of the title's embeddings beside a Dense of the stats, joined
  pair       inputs [b, a, c], b and a listed in the other order than they are created and
             used: a Dense tower on each, their Subtract and Multiply, beside an LSTM over a
             masked Embedding of c (int32 ids, 0 pads: the mask comes from the third
             input), joined and classified by a softmax Dense
Not run by `make test` (Keras is not a CI dependency). To regenerate (Keras 3.15.1, JAX, CPU):
  KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_multi_input.py
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from keras_import import expected, perturb  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

OUT = os.path.join(HERE, "multi_input")
L = keras.layers
N = 5
LR = 0.1
STEPS = 3


def wide_deep(rng):
    title = keras.Input((6,), dtype="int32", name="title")
    stats = keras.Input((3,), name="stats")
    e = L.Embedding(20, 4, mask_zero=True)(title)
    t = L.GlobalAveragePooling1D()(e)
    s = L.Dense(5, activation="relu")(stats)
    y = L.Dense(3)(L.Concatenate()([t, s]))
    model = keras.Model([title, stats], y)
    ids = rng.integers(1, 20, size=(N, 6)).astype(np.int32)
    for i in range(N):
        ids[i, 6 - i:] = 0  # right-padded, example 0 whole
    return model, [ids, rng.normal(size=(N, 3)).astype(np.float32)]


def pair(rng):
    a = keras.Input((4,), name="a")
    b = keras.Input((4,), name="b")
    c = keras.Input((5,), dtype="int32", name="c")
    ta = L.Dense(6, activation="tanh")(a)
    tb = L.Dense(6, activation="tanh")(b)
    d = L.Subtract()([ta, tb])
    p = L.Multiply()([ta, tb])
    seq = L.LSTM(3)(L.Embedding(9, 2, mask_zero=True)(c))
    y = L.Dense(2, activation="softmax")(L.Concatenate()([d, p, seq]))
    model = keras.Model([b, a, c], y)
    ids = rng.integers(1, 9, size=(N, 5)).astype(np.int32)
    for i in range(N):
        ids[i, 5 - i:] = 0
    return model, [rng.normal(size=(N, 4)).astype(np.float32),
                   rng.normal(size=(N, 4)).astype(np.float32), ids]


CASES = [wide_deep, pair]


def write_cases(cases, out, seed):
    """Writes each case's files (the module's docstring) into out, case k seeded seed + k."""
    os.makedirs(out, exist_ok=True)
    for k, case in enumerate(cases):
        keras.utils.clear_session()
        keras.utils.set_random_seed(seed + k)
        rng = np.random.default_rng(seed + k)
        model, xs = case(rng)
        perturb(model, rng)
        name = case.__name__
        path = os.path.join(out, name)
        y = np.asarray(model.predict(xs, verbose=0), dtype=np.float32)
        assert np.all(np.isfinite(y)) and np.std(y) > 1e-3, name
        model.save(path + ".keras")
        for i, x in enumerate(xs):
            np.save("%s.x%d.npy" % (path, i), x)
        np.save(path + ".y.npy", y)
        loaded = keras.saving.load_model(path + ".keras")
        d = float(np.max(np.abs(np.asarray(loaded.predict(xs, verbose=0)) - y)))
        assert d == 0, (name, d)
        # training: the inputs by name, as fit({"title": ..., "stats": ...}, y) takes them
        labels = rng.integers(0, y.shape[1], size=N).astype(np.int32)
        softmax = model.layers[-1].get_config().get("activation") == "softmax"
        model.compile(optimizer=keras.optimizers.SGD(LR),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=not softmax))
        named = {t.name.split(":")[0]: x for t, x in zip(model.inputs, xs)}
        for _ in range(STEPS):
            model.train_on_batch(named, labels)
        np.save(path + ".labels.npy", labels)
        save_file({"after/" + k: v for k, v in expected(model).items()},
                  path + ".after.safetensors", metadata={"lr": str(LR), "steps": str(STEPS)})
        print("%-10s inputs %s -> %s" % (name, [x.shape for x in xs], y.shape))


def main():
    write_cases(CASES, OUT, 3000)


if __name__ == "__main__":
    main()
