"""Keras 3 reference for `make bench-peers`: the networks of bench/models/*.yaml (mnist_mlp,
mnist_cnn, char_lstm, resnet20, bigru, conv1d, gpt_t128, gpt_t512, mobilenet), each training
step one `train_on_batch` (forward + loss + backward + SGD, compiled by Keras: a tf.function
on TensorFlow, XLA on JAX) on random data, median of N steps per repeat, one JSON line per
model with its trainable parameter count (checked against tfc's: a mismatch stops the
script) and the loss of its first step. The backend is KERAS_BACKEND's.

    keras_bench.py [THREADS] [--steps N] [--warmup N] [--repeats N]
                   [--models mnist_mlp,mnist_cnn,...]

TensorFlow gets THREADS intra-op threads and 1 inter-op thread; XLA's CPU client has no such
setting, so the caller pins JAX to THREADS cores (taskset)."""
import argparse
import json
import os
import time

ap = argparse.ArgumentParser()
ap.add_argument("threads", nargs="?", type=int, default=2)
ap.add_argument("--steps", type=int, default=150)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--repeats", type=int, default=3)
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
STEPS, REPEATS, WARMUP = args.steps, args.repeats, args.warmup


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


def bigru():
    """bench/models/bigru.yaml (no mask, no Dropout)."""
    return keras.Sequential([keras.Input((64,), dtype="int32"), layers.Embedding(8000, 64),
                             layers.Bidirectional(layers.GRU(48, return_sequences=True)),
                             layers.GlobalAveragePooling1D(),
                             layers.Dense(8, activation="softmax")])


def conv1d():
    return keras.Sequential([keras.Input((64,), dtype="int32"), layers.Embedding(8000, 64)] +
                            [layers.Conv1D(128, 5, padding="same", activation="relu")
                             for _ in range(3)] +
                            [layers.GlobalMaxPooling1D(), layers.Dense(8, activation="softmax")])


class PositionEmbedding(layers.Layer):
    """KerasHub's PositionEmbedding added to its input (KerasHub is not installed): x + w,
    w [sequence_length, features]."""

    def build(self, shape):
        self.w = self.add_weight(shape=tuple(shape[1:]), initializer="glorot_uniform",
                                 name="embeddings")

    def call(self, x):
        return x + self.w


def gpt(t):
    """bench/models/gpt_t*.yaml: token and position embeddings, 4 pre-norm blocks of causal
    MultiHeadAttention (4 heads of 32) and Dense(512, gelu) -> Dense(128), a final
    LayerNormalization, logits over 128 ids (the loss from logits)."""
    x = inp = keras.Input((t,), dtype="int32")
    x = PositionEmbedding()(layers.Embedding(128, 128)(x))
    for _ in range(4):
        h = layers.LayerNormalization()(x)
        h = layers.MultiHeadAttention(4, 32)(h, h, use_causal_mask=True)
        x = layers.Add()([x, h])
        h = layers.Dense(512, activation="gelu")(layers.LayerNormalization()(x))
        x = layers.Add()([x, layers.Dense(128)(h)])
    return keras.Model(inp, layers.Dense(128)(layers.LayerNormalization()(x)))


def mobilenet():
    """bench/models/mobilenet.yaml (model_zoo/fashion_mobilenet without its augmentation)."""
    def bn_act(h, act=True):
        h = layers.BatchNormalization()(h)
        return layers.ReLU(6.0)(h) if act else h

    def block(x, cin, expand, cout, stride, se):
        h = x
        if expand > 1:
            h = bn_act(layers.Conv2D(cin * expand, 1, use_bias=False)(h))
        h = bn_act(layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False)(h))
        if se:
            s = layers.GlobalAveragePooling2D(keepdims=True)(h)
            s = layers.Dense(se, activation="relu")(s)
            s = layers.Dense(cin * expand, activation="hard_sigmoid")(s)
            h = layers.Multiply()([h, s])
        h = bn_act(layers.Conv2D(cout, 1, use_bias=False)(h), act=False)
        return layers.Add()([h, x]) if stride == 1 and cin == cout else h

    x = inp = keras.Input((28, 28, 1))
    x = bn_act(layers.Conv2D(16, 3, padding="same", use_bias=False)(x))
    for args in ((16, 1, 16, 1, 0), (16, 4, 24, 2, 0), (24, 4, 24, 1, 0), (24, 4, 48, 2, 24),
                 (48, 4, 48, 1, 48)):
        x = block(x, *args)
    x = bn_act(layers.Conv2D(192, 1, use_bias=False)(x))
    x = layers.Dropout(0.2)(layers.GlobalAveragePooling2D()(x))
    return keras.Model(inp, layers.Dense(10, activation="softmax")(x))


rng = np.random.default_rng(0)
# tfc's trainable parameter counts of bench/models/*.yaml (bench_train's "params")
PARAMS = {"mnist_mlp": 669706, "mnist_cnn": 1199882, "char_lstm": 354384, "resnet20": 272474,
          "bigru": 545608, "conv1d": 718216, "gpt_t128": 842624, "gpt_t512": 891776,
          "mobilenet": 74194}
LOGITS = ("gpt_t128", "gpt_t512")  # models whose last layer has no softmax
MODELS = {
    "mnist_mlp": lambda: (mlp(), rng.random((128, 784), "float32"),
                          rng.integers(0, 10, (128,))),
    "mnist_cnn": lambda: (cnn(), rng.random((128, 28, 28, 1), "float32"),
                          rng.integers(0, 10, (128,))),
    "char_lstm": lambda: (char_lstm(), rng.integers(0, 80, (32, 64)).astype("int32"),
                          rng.integers(0, 80, (32, 64))),
    "resnet20": lambda: (resnet20(), rng.random((128, 32, 32, 3), "float32"),
                         rng.integers(0, 10, (128,))),
    "bigru": lambda: (bigru(), rng.integers(0, 8000, (32, 64)).astype("int32"),
                      rng.integers(0, 8, (32,))),
    "conv1d": lambda: (conv1d(), rng.integers(0, 8000, (32, 64)).astype("int32"),
                       rng.integers(0, 8, (32,))),
    "gpt_t128": lambda: (gpt(128), rng.integers(0, 128, (32, 128)).astype("int32"),
                         rng.integers(0, 128, (32, 128))),
    "gpt_t512": lambda: (gpt(512), rng.integers(0, 128, (8, 512)).astype("int32"),
                         rng.integers(0, 128, (8, 512))),
    "mobilenet": lambda: (mobilenet(), rng.random((128, 28, 28, 1), "float32"),
                          rng.integers(0, 10, (128,))),
}
for name in args.models.split(","):
    model, x, y = MODELS[name]()
    params = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert params == PARAMS[name], f"{name}: {params} parameters, tfc's copy has {PARAMS[name]}"
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=name in LOGITS)
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss=loss)
    reps, loss0 = [], None
    for _ in range(REPEATS):
        times = []
        for s in range(WARMUP + STEPS):
            t0 = time.perf_counter()
            out = model.train_on_batch(x, y)
            if loss0 is None:
                loss0 = float(out)
            if s >= WARMUP:
                times.append(time.perf_counter() - t0)
        times.sort()
        reps.append(1e3 * times[len(times) // 2])
    print(json.dumps({"model": name, "peer": f"keras {keras.__version__} {BACKEND}",
                      "threads": args.threads, "params": params, "loss0": round(loss0, 4),
                      "ms": [round(r, 3) for r in reps]}), flush=True)
