"""Keras 3 references for the weight constraints (tests/test_constraints.c, keras_steps).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_constraints.py
Writes tests/ref/constraints/<case>.safetensors for each case below: the weights before
training under tfc's names (`<layer>/<variable>`), the input `x` and labels `labels` (int32
class ids) of one batch, the weights after STEPS plain SGD updates on that batch
(`model.train_on_batch`, learning rate LR, large enough that every constraint binds) under
`after/<layer>/<variable>`, and the tfc model YAML in the metadata (`yaml`) with the solver's
`lr` and `steps`. Keras applies each variable's constraint after the optimizer's update
(BaseOptimizer.apply). Weights are uniform in [-0.5, 0.5) from a fixed seed (moving variances in
[0.5, 1.5)), inputs uniform in [-1, 1) or token ids in [1, 12).
"""
import os

import numpy as np
import keras
from keras import constraints as C
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "constraints")
LR = 0.5
STEPS = 3


def image():
    x = keras.Input((6, 6, 2))
    h = L.Conv2D(3, 3, kernel_constraint=C.MaxNorm(0.5, axis=[0, 1, 2]),
                 bias_constraint=C.NonNeg(), name="c")(x)
    h = L.BatchNormalization(gamma_constraint=C.MinMaxNorm(0.5, 0.8, rate=0.7),
                             beta_constraint="non_neg", name="bn")(h)
    h = L.DepthwiseConv2D(3, depthwise_constraint=C.UnitNorm(axis=[0, 1]), name="dw")(h)
    h = L.SeparableConv2D(2, 1, depthwise_constraint=C.MaxNorm(0.4, axis=[0, 1, 2]),
                          pointwise_constraint=C.UnitNorm(axis=[0, 1, 2]), name="sep")(h)
    h = L.Flatten(name="f")(h)
    h = L.Dense(8, kernel_constraint=C.MaxNorm(0.3, axis=0), name="d")(h)
    h = L.PReLU(alpha_constraint=C.NonNeg(), name="p")(h)
    y = L.Dense(4, activation="softmax", kernel_constraint=C.UnitNorm(axis=-1),
                bias_constraint=C.MinMaxNorm(0.2, 0.4, rate=0.5), name="out")(h)
    return x, y, 4, """input: {shape: [6, 6, 2]}
layers:
  - Conv2D: {name: c, filters: 3, kernel_size: 3, kernel_constraint: {type: max_norm, max_value: 0.5, axis: [0, 1, 2]}, bias_constraint: NonNeg}
  - BatchNormalization: {name: bn, gamma_constraint: {class_name: MinMaxNorm, config: {min_value: 0.5, max_value: 0.8, rate: 0.7, axis: 0}}, beta_constraint: non_neg}
  - DepthwiseConv2D: {name: dw, kernel_size: 3, depthwise_constraint: {type: UnitNorm, axis: [0, 1]}}
  - SeparableConv2D: {name: sep, filters: 2, kernel_size: 1, depthwise_constraint: {type: max_norm, max_value: 0.4, axis: [0, 1, 2]}, pointwise_constraint: {type: unit_norm, axis: [0, 1, 2]}}
  - Flatten: {name: f}
  - Dense: {name: d, units: 8, kernel_constraint: {type: max_norm, max_value: 0.3, axis: 0}}
  - PReLU: {name: p, alpha_constraint: {class_name: NonNeg, config: {}}}
  - Dense: {name: out, units: 4, activation: softmax, kernel_constraint: {type: unit_norm, axis: -1}, bias_constraint: {type: min_max_norm, min_value: 0.2, max_value: 0.4, rate: 0.5}}
loss: sparse_categorical_crossentropy
"""


def sequence():
    x = keras.Input((5,), dtype="int32")
    h = L.Embedding(12, 4, embeddings_constraint=C.UnitNorm(axis=1), name="e")(x)
    h = L.LSTM(3, return_sequences=True, kernel_constraint=C.MaxNorm(0.6),
               recurrent_constraint=C.UnitNorm(axis=0), bias_constraint="non_neg",
               name="lstm")(h)
    h = L.LayerNormalization(gamma_constraint=C.MaxNorm(1.2), beta_constraint=C.NonNeg(),
                             name="ln")(h)
    h = L.GRU(4, kernel_constraint=C.MinMaxNorm(0.3, 0.5, axis=0),
              recurrent_constraint=C.MaxNorm(0.5, axis=1), name="gru")(h)
    y = L.Dense(3, activation="softmax", kernel_constraint="max_norm", name="out")(h)
    return x, y, 3, """input: {shape: [5], dtype: int32}
layers:
  - Embedding: {name: e, input_dim: 12, output_dim: 4, embeddings_constraint: {type: unit_norm, axis: 1}}
  - LSTM: {name: lstm, units: 3, return_sequences: true, kernel_constraint: {type: max_norm, max_value: 0.6}, recurrent_constraint: unit_norm, bias_constraint: non_neg}
  - LayerNormalization: {name: ln, gamma_constraint: {type: max_norm, max_value: 1.2}, beta_constraint: NonNeg}
  - GRU: {name: gru, units: 4, kernel_constraint: {type: min_max_norm, min_value: 0.3, max_value: 0.5, axis: 0}, recurrent_constraint: {type: max_norm, max_value: 0.5, axis: 1}}
  - Dense: {name: out, units: 3, activation: softmax, kernel_constraint: max_norm}
loss: sparse_categorical_crossentropy
"""


CASES = [image, sequence]


def named(model):
    """{tfc's name: the variable}: a recurrent cell's segment dropped"""
    out = {}
    for layer in model.layers:
        for w in layer.weights:
            path = w.path.split("/", 1)[1]
            path = path.replace("lstm_cell/", "").replace("gru_cell/", "")
            out[f"{layer.name}/{path}"] = w
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(11)
    for case in CASES:
        inp, out, classes, yaml = case()
        model = keras.Model(inp, out)
        model.compile(loss="sparse_categorical_crossentropy",
                      optimizer=keras.optimizers.SGD(learning_rate=LR))
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
        moved = 0
        for name, w in named(model).items():
            v = np.asarray(w.value)
            tensors["after/" + name] = v
            moved += int(not np.allclose(v, tensors[name]))
        # the constraints bind: the conv kernel's filters are at norm 0.5
        if case is image:
            k = tensors["after/c/kernel"]
            norms = np.sqrt((k * k).sum(axis=(0, 1, 2)))
            assert np.allclose(norms, 0.5, atol=1e-5), norms
        tensors.update(x=x, labels=labels)
        save_file(tensors, os.path.join(OUT, case.__name__ + ".safetensors"),
                  metadata={"yaml": yaml, "lr": str(LR), "steps": str(STEPS)})
        print(f"{case.__name__}: {moved} of {len(tensors) // 2 - 1} weights moved")


if __name__ == "__main__":
    main()
