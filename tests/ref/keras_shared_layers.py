#!/usr/bin/env python3
"""Keras 3 functional models that call a layer on several tensors (shared layers), saved as a
Keras user saves them, for tfc's shared-layer tests (tests/test_shared_layers.c).

Each case builds a model with Keras's own API, perturbs its weights away from their initial
values (keras_import.perturb) and writes into tests/ref/shared_layers/:
  CASE.keras        model.save()
  CASE.xK.npy       input K's examples, K in the model's input order (model.inputs)
  CASE.y.npy        Keras's model.predict on them, the inputs as a list (float32)
  CASE.labels.npy   int32 class ids of those examples
  CASE.after.safetensors  every variable under after/ + tfc's name (keras_import.expected) after
                    STEPS model.train_on_batch steps of plain SGD (learning rate LR) on that
                    batch, the inputs as a dict by name, from the saved weights (metadata:
                    lr, steps)

Cases:
  siamese   inputs [a, b] (float32): one tower of two Dense layers called on each, their
            Subtract and Multiply joined and classified by a Dense head
  encoder   inputs [q, d] (int32 ids): one Embedding and one LSTM called on each (no
            mask_zero: tfc takes the mask of one input), the second read through node 1 by
            a Concatenate, and a softmax Dense
Not run by `make test` (Keras is not a CI dependency). To regenerate (Keras 3.15.1, JAX, CPU):
  KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_shared_layers.py
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from keras_multi_input import write_cases  # noqa: E402

OUT = os.path.join(HERE, "shared_layers")
L = keras.layers
N = 5


def siamese(rng):
    a = keras.Input((4,), name="a")
    b = keras.Input((4,), name="b")
    d1 = L.Dense(6, activation="tanh")
    d2 = L.Dense(3)
    ta, tb = d2(d1(a)), d2(d1(b))
    y = L.Dense(3)(L.Concatenate()([L.Subtract()([ta, tb]), L.Multiply()([ta, tb])]))
    model = keras.Model([a, b], y)
    return model, [rng.normal(size=(N, 4)).astype(np.float32),
                   rng.normal(size=(N, 4)).astype(np.float32)]


def encoder(rng):
    q = keras.Input((5,), dtype="int32", name="q")
    d = keras.Input((5,), dtype="int32", name="d")
    emb = L.Embedding(9, 3)
    rnn = L.LSTM(4)
    y = L.Dense(2, activation="softmax")(L.Concatenate()([rnn(emb(q)), rnn(emb(d))]))
    model = keras.Model([q, d], y)
    return model, [rng.integers(0, 9, size=(N, 5)).astype(np.int32),
                   rng.integers(0, 9, size=(N, 5)).astype(np.int32)]


CASES = [siamese, encoder]


def main():
    write_cases(CASES, OUT, 4000)


if __name__ == "__main__":
    main()
