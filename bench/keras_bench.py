"""Keras 3 reference for `make bench-peers`: the networks of bench/models/*.yaml (mnist_mlp,
mnist_cnn, char_lstm, resnet20), each training step one `train_on_batch` (forward + loss +
backward + SGD, compiled by Keras: a tf.function on TensorFlow, XLA on JAX) on random data,
median of N steps per repeat, one JSON line per model. The backend is KERAS_BACKEND's.

    keras_bench.py [THREADS] [--steps N] [--models mnist_mlp,mnist_cnn,char_lstm,resnet20]

TensorFlow gets THREADS intra-op threads and 1 inter-op thread; XLA's CPU client has no such
setting, so the caller pins JAX to THREADS cores (taskset)."""
import argparse
import json
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("threads", nargs="?", type=int, default=2)
ap.add_argument("--steps", type=int, default=150)
ap.add_argument("--models", default="mnist_mlp,mnist_cnn,char_lstm,resnet20")
args = ap.parse_args()

import keras  # noqa: E402  (after the environment is read)
import numpy as np  # noqa: E402
from keras import layers  # noqa: E402

BACKEND = keras.backend.backend()
if BACKEND == "tensorflow":
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
STEPS, REPEATS, WARMUP = args.steps, 3, 20


def mlp():
    return keras.Sequential([keras.Input((784,)), layers.Dense(512, activation="relu"),
                             layers.Dropout(0.2), layers.Dense(512, activation="relu"),
                             layers.Dropout(0.2), layers.Dense(10, activation="softmax")])


def cnn():
    return keras.Sequential([keras.Input((28, 28, 1)), layers.Conv2D(32, 3, activation="relu"),
                             layers.Conv2D(64, 3, activation="relu"), layers.MaxPooling2D(2),
                             layers.Dropout(0.25), layers.Flatten(),
                             layers.Dense(128, activation="relu"), layers.Dropout(0.5),
                             layers.Dense(10, activation="softmax")])


def char_lstm():
    return keras.Sequential([keras.Input((64,), dtype="int32"), layers.Embedding(80, 64),
                             layers.LSTM(256, return_sequences=True),
                             layers.Dense(80, activation="softmax")])


def resnet20():
    """ResNet-20 as bench/models/resnet20.yaml: option-B projections where the shape changes."""
    x = inp = keras.Input((32, 32, 3))
    x = layers.ReLU()(layers.BatchNormalization()(layers.Conv2D(16, 3, padding="same",
                                                                use_bias=False)(x)))
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for b in range(3):
            s = stride if b == 0 else 1
            h = layers.Conv2D(cout, 3, strides=s, padding="same", use_bias=False)(x)
            h = layers.ReLU()(layers.BatchNormalization()(h))
            h = layers.BatchNormalization()(layers.Conv2D(cout, 3, padding="same",
                                                          use_bias=False)(h))
            sc = x
            if s != 1 or cin != cout:
                sc = layers.BatchNormalization()(layers.Conv2D(cout, 1, strides=s,
                                                               use_bias=False)(x))
            x = layers.ReLU()(layers.Add()([h, sc]))
            cin = cout
    x = layers.Dense(10, activation="softmax")(layers.GlobalAveragePooling2D()(x))
    return keras.Model(inp, x)


rng = np.random.default_rng(0)
MODELS = {
    "mnist_mlp": lambda: (mlp(), rng.random((128, 784), "float32"),
                          rng.integers(0, 10, (128,))),
    "mnist_cnn": lambda: (cnn(), rng.random((128, 28, 28, 1), "float32"),
                          rng.integers(0, 10, (128,))),
    "char_lstm": lambda: (char_lstm(), rng.integers(0, 80, (32, 64)).astype("int32"),
                          rng.integers(0, 80, (32, 64))),
    "resnet20": lambda: (resnet20(), rng.random((128, 32, 32, 3), "float32"),
                         rng.integers(0, 10, (128,))),
}
for name in args.models.split(","):
    model, x, y = MODELS[name]()
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="sparse_categorical_crossentropy")
    reps = []
    for _ in range(REPEATS):
        times = []
        for s in range(WARMUP + STEPS):
            t0 = time.perf_counter()
            model.train_on_batch(x, y)
            if s >= WARMUP:
                times.append(time.perf_counter() - t0)
        times.sort()
        reps.append(1e3 * times[len(times) // 2])
    print(json.dumps({"model": name, "peer": f"keras {keras.__version__} {BACKEND}",
                      "threads": args.threads, "ms": [round(r, 3) for r in reps]}), flush=True)
