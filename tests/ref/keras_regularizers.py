"""Keras 3 references for the weight regularizers (tests/test_regularizers.c, keras_loss).

Run: KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_regularizers.py
Writes tests/ref/regularizers/<case>.safetensors for each case below: the weights under tfc's
names (`<layer>/<variable>`), the input `x`, the labels `labels` (int32 class ids), Keras's
`model.evaluate` loss `loss` (the cross-entropy plus every regularizer's penalty, as Keras's
compute_loss adds them; the activity regularizers' too) and the penalty alone `penalty`
(sum(model.losses), or the activity penalties recomputed from the layers' outputs), and the tfc model
YAML in the metadata (`yaml`). Weights are uniform in [-0.5, 0.5) from a fixed seed (moving
variances in [0.5, 1.5)), inputs uniform in [-1, 1) or token ids in [1, 12).
"""
import os

import numpy as np
import keras
from keras import layers as L
from keras import regularizers as R
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regularizers")


def image():
    x = keras.Input((6, 6, 2))
    h = L.Conv2D(3, 3, kernel_regularizer=R.L2(1e-2), bias_regularizer=R.L1(1e-2), name="c")(x)
    h = L.BatchNormalization(gamma_regularizer=R.L2(0.05),
                             beta_regularizer=R.L1L2(0.01, 0.02), name="bn")(h)
    h = L.DepthwiseConv2D(3, depthwise_regularizer=R.L1(0.003), name="dw")(h)
    h = L.SeparableConv2D(2, 1, depthwise_regularizer="l2", pointwise_regularizer=R.L1(0.02),
                          name="sep")(h)
    h = L.Flatten(name="f")(h)
    h = L.Dense(8, kernel_regularizer="l2", name="d")(h)
    h = L.PReLU(alpha_regularizer=R.L2(0.1), name="p")(h)
    y = L.Dense(4, activation="softmax", kernel_regularizer=R.L1L2(1e-3, 2e-3), name="out")(h)
    return x, y, 4, """input: {shape: [6, 6, 2]}
layers:
  - Conv2D: {name: c, filters: 3, kernel_size: 3, kernel_regularizer: {type: l2, l2: 0.01}, bias_regularizer: {class_name: L1, config: {l1: 0.01}}}
  - BatchNormalization: {name: bn, gamma_regularizer: {l2: 0.05}, beta_regularizer: {type: l1l2, l1: 0.01, l2: 0.02}}
  - DepthwiseConv2D: {name: dw, kernel_size: 3, depthwise_regularizer: {type: L1, l1: 0.003}}
  - SeparableConv2D: {name: sep, filters: 2, kernel_size: 1, depthwise_regularizer: l2, pointwise_regularizer: {type: l1, l1: 0.02}}
  - Flatten: {name: f}
  - Dense: {name: d, units: 8, kernel_regularizer: L2}
  - PReLU: {name: p, alpha_regularizer: {l2: 0.1}}
  - Dense: {name: out, units: 4, activation: softmax, kernel_regularizer: {class_name: L1L2, config: {l1: 0.001, l2: 0.002}}}
loss: sparse_categorical_crossentropy
"""


def sequence():
    x = keras.Input((5,), dtype="int32")
    h = L.Embedding(12, 4, embeddings_regularizer=R.L2(0.01), name="e")(x)
    h = L.Bidirectional(L.LSTM(3, return_sequences=True, kernel_regularizer=R.L2(0.02),
                               recurrent_regularizer=R.L1(0.01), bias_regularizer=R.L2(0.03)),
                        name="bi")(h)
    h = L.LayerNormalization(gamma_regularizer=R.L1(0.01), beta_regularizer=R.L2(0.02),
                             name="ln")(h)
    h = L.MultiHeadAttention(2, 3, kernel_regularizer=R.L2(0.01), bias_regularizer=R.L1(0.01),
                             name="mha")(h, h)
    h = L.GRU(4, kernel_regularizer=R.L1(0.001), recurrent_regularizer=R.L2(0.002),
              bias_regularizer=R.L2(0.003), name="gru")(h)
    y = L.Dense(3, activation="softmax", bias_regularizer=R.L2(0.5), name="out")(h)
    return x, y, 3, """input: {shape: [5], dtype: int32}
layers:
  - Embedding: {name: e, input_dim: 12, output_dim: 4, embeddings_regularizer: {l2: 0.01}}
  - Bidirectional: {name: bi, layer: {LSTM: {units: 3, return_sequences: true, kernel_regularizer: {l2: 0.02}, recurrent_regularizer: {type: l1, l1: 0.01}, bias_regularizer: {l2: 0.03}}}}
  - LayerNormalization: {name: ln, gamma_regularizer: {type: l1, l1: 0.01}, beta_regularizer: {l2: 0.02}}
  - MultiHeadAttention: {name: mha, num_heads: 2, key_dim: 3, kernel_regularizer: {l2: 0.01}, bias_regularizer: {type: l1, l1: 0.01}}
  - GRU: {name: gru, units: 4, kernel_regularizer: {type: l1, l1: 0.001}, recurrent_regularizer: {l2: 0.002}, bias_regularizer: {l2: 0.003}}
  - Dense: {name: out, units: 3, activation: softmax, bias_regularizer: {l2: 0.5}}
loss: sparse_categorical_crossentropy
"""


def activity():
    """activity_regularizer on several kinds of layer (a fused ReLU, a softmax the loss
    folds, an LSTM's sequences) and the ActivityRegularization layer: Keras 3 adds each
    output's penalty over the batch size to the loss"""
    x = keras.Input((6, 6, 2))
    h = L.Conv2D(3, 3, activation="relu", activity_regularizer=R.L2(0.01), name="c")(x)
    h = L.ActivityRegularization(l1=0.01, l2=0.005, name="ar")(h)
    h = L.Reshape((16, 3), name="r")(h)
    h = L.LSTM(4, return_sequences=True, activity_regularizer=R.L1(0.02), name="lstm")(h)
    h = L.Flatten(name="f")(h)
    h = L.Dense(8, activation="tanh", activity_regularizer=R.L1L2(0.01, 0.02), name="d")(h)
    y = L.Dense(4, activation="softmax", activity_regularizer=R.L2(0.5), name="out")(h)
    return x, y, 4, """input: {shape: [6, 6, 2]}
layers:
  - Conv2D: {name: c, filters: 3, kernel_size: 3, activation: relu, activity_regularizer: {l2: 0.01}}
  - ActivityRegularization: {name: ar, l1: 0.01, l2: 0.005}
  - Reshape: {name: r, target_shape: [16, 3]}
  - LSTM: {name: lstm, units: 4, return_sequences: true, activity_regularizer: {class_name: L1, config: {l1: 0.02}}}
  - Flatten: {name: f}
  - Dense: {name: d, units: 8, activation: tanh, activity_regularizer: {type: l1l2, l1: 0.01, l2: 0.02}}
  - Dense: {name: out, units: 4, activation: softmax, activity_regularizer: {l2: 0.5}}
loss: sparse_categorical_crossentropy
"""


CASES = [image, sequence, activity]


def activity_penalty(model, x):
    """The activity regularizers' penalties, each output's over the batch size (Keras 3's
    Layer.__call__), from the outputs of a model of the regularized layers"""
    regs = [l for l in model.layers if l.activity_regularizer is not None]
    if not regs:
        return 0.0
    outs = keras.Model(model.inputs, [l.output for l in regs])(x)
    if len(regs) == 1:
        outs = [outs]
    return float(sum(np.asarray(l.activity_regularizer(o)) / x.shape[0]
                     for l, o in zip(regs, outs)))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    for case in CASES:
        inp, out, classes, yaml = case()
        model = keras.Model(inp, out)
        model.compile(loss="sparse_categorical_crossentropy")
        tensors = {}
        for layer in model.layers:
            for w in layer.weights:
                v = rng.uniform(-0.5, 0.5, w.shape).astype(np.float32)
                if w.name == "moving_variance":
                    v = rng.uniform(0.5, 1.5, w.shape).astype(np.float32)
                w.assign(v)
                path = w.path.split("/", 1)[1]  # tfc's: a recurrent cell's segment dropped
                path = path.replace("lstm_cell/", "").replace("gru_cell/", "")
                tensors[f"{layer.name}/{path}"] = v
        n = 6
        if inp.dtype == "int32":
            x = rng.integers(1, 12, (n,) + tuple(inp.shape[1:])).astype(np.int32)
        else:
            x = rng.uniform(-1, 1, (n,) + tuple(inp.shape[1:])).astype(np.float32)
        labels = rng.integers(0, classes, (n,)).astype(np.int32)
        loss = model.evaluate(x, labels, batch_size=n, verbose=0)
        penalty = float(np.sum([np.asarray(p) for p in model.losses]))
        if case is activity:  # model.losses after evaluate holds the weights' alone
            penalty = activity_penalty(model, x)
        tensors.update(x=x, labels=labels, loss=np.array([loss], np.float32),
                       penalty=np.array([penalty], np.float32))
        save_file(tensors, os.path.join(OUT, case.__name__ + ".safetensors"),
                  metadata={"yaml": yaml})
        print(f"{case.__name__}: loss {loss:.6f} of which penalty {penalty:.6f}, "
              f"{len(tensors) - 4} weights")


if __name__ == "__main__":
    main()
