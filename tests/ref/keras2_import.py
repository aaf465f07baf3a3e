#!/usr/bin/env python3
"""Genuine Keras 2 `.h5` files (tf_keras, Keras 2 on TensorFlow) for tfc-import's tests.

Writes into tests/ref/import/:
  keras2_mlp.h5      a Sequential MLP with BatchNormalization (model.save("x.h5"))
  keras2_bilstm.h5   a functional Embedding + Bidirectional(LSTM) + Dense model
  keras2_nested.h5   a frozen functional model called with training=False inside a
                     functional model (Keras 2 numbers its call there 1)
and for each CASE.x.npy (inputs) and CASE.y.npy (tf_keras's model.predict on them).
Weights are seeded and moved off their constant initial values (biases, gammas, betas;
BatchNormalization's moving statistics off 0 and 1), no training.

Not run by `make test`. To regenerate (tf_keras 2.21 beside TensorFlow 2.21):
  /tmp/kvenv/bin/pip install tf_keras==2.21.*
  /tmp/kvenv/bin/python tests/ref/keras2_import.py [CASE...]   (CASE: mlp, bilstm, nested)
The .npy files are the same at every run; the .h5 files differ in HDF5's timestamps.
"""
import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
import tf_keras as keras

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "import")
L = keras.layers
N = 4


def mlp(rng):
    model = keras.Sequential([
        L.Dense(12, activation="relu", input_shape=(6,)),
        L.BatchNormalization(),
        L.Dropout(0.3),
        L.Dense(3, activation="softmax"),
    ])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model, rng.normal(size=(N, 6)).astype(np.float32)


def bilstm(rng):
    inputs = keras.Input(shape=(8,), dtype="int32")
    x = L.Embedding(30, 6, mask_zero=True)(inputs)
    x = L.Bidirectional(L.LSTM(5))(x)
    outputs = L.Dense(2, activation="sigmoid")(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="rmsprop", loss="binary_crossentropy", metrics=["accuracy"])
    ids = rng.integers(1, 30, size=(N, 8)).astype(np.int32)
    for i, n in enumerate((8, 5, 2, 6)):  # right-padded with 0
        ids[i, n:] = 0
    return model, ids


def nested(rng):
    bi = keras.Input(shape=(6, 6, 3))
    b = L.Conv2D(4, 3, padding="same")(bi)
    b = L.BatchNormalization()(b)
    base = keras.Model(bi, L.ReLU()(b), name="base")
    base.trainable = False
    inputs = keras.Input(shape=(6, 6, 3))
    x = base(inputs, training=False)
    x = L.GlobalAveragePooling2D()(x)
    outputs = L.Dense(2)(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="mse")
    return model, rng.normal(size=(N, 6, 6, 3)).astype(np.float32)


def perturb(model, rng):
    for v in model.weights:
        a = v.numpy()
        leaf = v.name.split("/")[-1].split(":")[0]
        if leaf == "moving_variance":
            a = rng.uniform(0.5, 2.0, size=a.shape)
        elif leaf == "moving_mean":
            a = rng.normal(0.0, 0.5, size=a.shape)
        elif a.ndim <= 1:
            a = a + rng.normal(0.0, 0.2, size=a.shape)
        else:
            continue
        v.assign(a.astype(np.float32))


def main():
    os.makedirs(OUT, exist_ok=True)
    import sys
    only = sys.argv[1:]  # case names: write those alone (each keeps its seed)
    for k, case in enumerate((mlp, bilstm, nested)):
        if only and case.__name__ not in only:
            continue
        keras.backend.clear_session()
        tf.random.set_seed(100 + k)
        rng = np.random.default_rng(100 + k)
        model, x = case(rng)
        perturb(model, rng)
        y = np.asarray(model.predict(x, verbose=0), dtype=np.float32)
        assert np.all(np.isfinite(y)) and np.std(y) > 1e-3
        path = os.path.join(OUT, "keras2_" + case.__name__)
        model.save(path + ".h5")
        np.save(path + ".x.npy", x)
        np.save(path + ".y.npy", y)
        back = keras.models.load_model(path + ".h5")
        assert np.array_equal(np.asarray(back.predict(x, verbose=0), dtype=np.float32), y)
        print("%s: tf_keras %s, %d bytes" % (path, keras.__version__,
                                            os.path.getsize(path + ".h5")))


if __name__ == "__main__":
    main()
