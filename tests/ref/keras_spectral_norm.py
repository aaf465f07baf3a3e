"""Keras 3 references for SpectralNormalization (tests/test_spectral_norm.c, keras_steps).

Run: KERAS_BACKEND=tensorflow /tmp/kvenv/bin/python tests/ref/keras_spectral_norm.py
The TensorFlow backend, not JAX: SpectralNormalization.call assigns the normalized kernel to
the inner layer's kernel before calling it, which TensorFlow keeps (the stored kernel is the
normalized one, and the gradient reaches it as the plain layer's does), where Keras on JAX
drops the assignment of a trainable variable in its stateless call (the gradient then flows
through W / sigma to the raw kernel, which stays unnormalized); tfc follows TensorFlow
(docs/layers.md). Writes tests/ref/spectral_norm/<case>.safetensors for each case below: the
weights before training under tfc's names (`<layer>/<variable>`), the input `x` and labels
`labels` (int32 class ids) of one batch, the weights after STEPS plain SGD updates on that
batch (`model.train_on_batch`: each step runs the power iteration, updates vector_u and
assigns the normalized kernel) under `after/<layer>/<variable>`, Keras's inference output on
`x` after them (`y`), and the tfc model YAML in the metadata (`yaml`) with the solver's `lr`
and `steps`. And parity_<case>.safetensors in tests/util/kerasref.h's format: the weights
(uniform in [-0.5, 0.5)), x, Keras's inference output y, a target t, and after one training
forward (the power iteration, the kernel assigned) the gradients of the MSE loss with respect
to x (dx) and each trainable weight (grad:<path>), and vector_u after it (moved:<path>).
"""
import os

import numpy as np
import tensorflow as tf
import keras
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spectral_norm")
LR = 0.3
STEPS = 3


def image():
    x = keras.Input((6, 6, 2))
    h = L.SpectralNormalization(L.Conv2D(3, 3, activation="relu"), name="sc")(x)
    h = L.SpectralNormalization(L.DepthwiseConv2D(2, name="dw"), power_iterations=2,
                                name="sdw")(h)
    h = L.SpectralNormalization(L.Conv2DTranspose(2, 2, strides=2, name="ct"), name="sct")(h)
    h = L.Flatten(name="f")(h)
    y = L.SpectralNormalization(L.Dense(4, activation="softmax", name="d"),
                                power_iterations=3, name="sd")(h)
    return x, y, 4, """input: {shape: [6, 6, 2]}
layers:
  - SpectralNormalization: {name: sc, layer: {Conv2D: {filters: 3, kernel_size: 3, activation: relu}}}
  - SpectralNormalization: {name: sdw, power_iterations: 2, layer: {DepthwiseConv2D: {name: dw, kernel_size: 2}}}
  - SpectralNormalization: {name: sct, layer: {Conv2DTranspose: {name: ct, filters: 2, kernel_size: 2, strides: 2}}}
  - Flatten: {name: f}
  - SpectralNormalization: {name: sd, power_iterations: 3, layer: {Dense: {name: d, units: 4, activation: softmax}}}
loss: sparse_categorical_crossentropy
"""


def sequence():
    x = keras.Input((5, 4))
    h = L.SpectralNormalization(L.Conv1D(3, 2, padding="causal", use_bias=False, name="c"),
                                name="sc")(x)
    h = L.SpectralNormalization(L.EinsumDense("btc,cd->btd", output_shape=(None, 3),
                                              name="ed"), name="sed")(h)
    h = L.GlobalAveragePooling1D(name="g")(h)
    y = L.Dense(3, activation="softmax", name="out")(h)
    return x, y, 3, """input: {shape: [5, 4]}
layers:
  - SpectralNormalization: {name: sc, layer: {Conv1D: {name: c, filters: 3, kernel_size: 2, padding: causal, use_bias: false}}}
  - SpectralNormalization: {name: sed, layer: {EinsumDense: {name: ed, equation: "btc,cd->btd", output_shape: [null, 3]}}}
  - GlobalAveragePooling1D: {name: g}
  - Dense: {name: out, units: 3, activation: softmax}
loss: sparse_categorical_crossentropy
"""


CASES = [image, sequence]


def named(model):
    """{tfc's name: the variable}"""
    out = {}
    for layer in model.layers:
        for w in layer.weights:
            out[f"{layer.name}/{w.path.split('/', 1)[1]}"] = w
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(5)
    for case in CASES:
        keras.backend.clear_session()
        inp, out, classes, yaml = case()
        model = keras.Model(inp, out)
        model.compile(loss="sparse_categorical_crossentropy",
                      optimizer=keras.optimizers.SGD(learning_rate=LR))
        tensors = {}
        for name, w in named(model).items():
            v = rng.uniform(-0.5, 0.5, w.shape).astype(np.float32)
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
        for name, w in named(model).items():
            tensors["after/" + name] = np.asarray(w.numpy())
            assert not np.allclose(tensors["after/" + name], tensors[name]), name
        tensors["y"] = np.asarray(model.predict(x, verbose=0))
        tensors.update(x=x, labels=labels)
        save_file(tensors, os.path.join(OUT, case.__name__ + ".safetensors"),
                  metadata={"yaml": yaml, "lr": str(LR), "steps": str(STEPS)})
        print(case.__name__, sorted(k for k in tensors if not k.startswith("after/")))


def parity():
    """The kerasref fixtures: one training forward's gradients under the TensorFlow backend"""
    rng = np.random.default_rng(9)
    for case in CASES:
        keras.backend.clear_session()
        inp, out, _, yaml = case()
        model = keras.Model(inp, out)
        for v in model.weights:
            v.assign(rng.uniform(-0.5, 0.5, v.shape).astype(np.float32))
        x = rng.uniform(-1, 1, (3,) + tuple(inp.shape[1:])).astype(np.float32)
        y = np.asarray(model(x, training=False))
        t = rng.uniform(0, 1, y.shape).astype(np.float32)
        tensors = {"x": x, "y": y, "t": t}
        for v in model.weights:
            tensors[v.path] = np.asarray(v.numpy())
        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            loss = tf.reduce_mean(tf.reduce_mean(tf.square(model(xt, training=True) - t), -1))
        grads = tape.gradient(loss, [xt] + [v.value for v in model.trainable_variables])
        tensors["dx"] = grads[0].numpy()
        for v, g in zip(model.trainable_variables, grads[1:]):
            tensors["grad:" + v.path] = g.numpy()
        for v in model.non_trainable_variables:
            tensors["moved:" + v.path] = np.asarray(v.numpy())
        yaml = yaml.replace("loss: sparse_categorical_crossentropy\n", "loss: mse\n")
        save_file(tensors, os.path.join(OUT, "parity_" + case.__name__ + ".safetensors"),
                  metadata={"yaml": yaml, "keras": keras.__version__,
                            "backend": keras.backend.backend()})
        print("parity_" + case.__name__, sorted(tensors))


if __name__ == "__main__":
    main()
    parity()
