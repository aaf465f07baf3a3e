"""Keras 3 references for the vision layers (tests/test_vision.c, parity_keras).

Run: KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_vision.py
Writes tests/ref/vision/<case>.safetensors for each case below: the weights under tfc's names
(`<layer>/<variable>`, Keras's own paths), the input `x` [2, ...], Keras's inference output
`y`, and the tfc model YAML in the metadata (`yaml`). Weights are uniform in [-0.5, 0.5)
from a fixed seed, inputs uniform in [-1, 1).
"""
import os

import numpy as np
import keras
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vision")


def depthwise_same_s2():
    x = keras.Input((7, 8, 3))
    y = L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2,
                          activation="relu6", name="dw")(x)
    return x, y, """input: {shape: [7, 8, 3]}
layers:
  - DepthwiseConv2D: {name: dw, kernel_size: 3, strides: 2, padding: same, depth_multiplier: 2, activation: relu6}
"""


def depthwise_dilated_strided():
    x = keras.Input((9, 7, 4))
    y = L.DepthwiseConv2D((2, 3), strides=(1, 2), dilation_rate=(2, 1), depth_multiplier=3,
                          use_bias=False, activation="mish", name="dw")(x)
    return x, y, """input: {shape: [9, 7, 4]}
layers:
  - DepthwiseConv2D: {name: dw, kernel_size: [2, 3], strides: [1, 2], dilation_rate: [2, 1], depth_multiplier: 3, use_bias: false, activation: mish}
"""


def depthwise_valid_hard_silu():
    x = keras.Input((6, 6, 5))
    h = L.DepthwiseConv2D(3, activation="hard_silu", name="dw")(x)
    y = L.Conv2D(2, 1, name="pw")(h)
    return x, y, """input: {shape: [6, 6, 5]}
layers:
  - DepthwiseConv2D: {name: dw, kernel_size: 3, activation: hard_silu}
  - Conv2D: {name: pw, filters: 2, kernel_size: 1}
"""


def padding_cropping():
    x = keras.Input((5, 6, 2))
    h = L.ZeroPadding2D(((1, 2), (0, 3)), name="p1")(x)
    h = L.Cropping2D(((2, 0), (1, 1)), name="c1")(h)
    h = L.ZeroPadding2D(1, name="p2")(h)
    h = L.Cropping2D((1, 2), name="c2")(h)
    y = L.ZeroPadding2D((0, (2, 1)), name="p3")(h)
    return x, y, """input: {shape: [5, 6, 2]}
layers:
  - ZeroPadding2D: {name: p1, padding: [[1, 2], [0, 3]]}
  - Cropping2D: {name: c1, cropping: [[2, 0], [1, 1]]}
  - ZeroPadding2D: {name: p2, padding: 1}
  - Cropping2D: {name: c2, cropping: [1, 2]}
  - ZeroPadding2D: {name: p3, padding: [0, [2, 1]]}
"""


def upsampling_nearest():
    x = keras.Input((3, 5, 2))
    y = L.UpSampling2D((2, 3), name="u")(x)
    return x, y, """input: {shape: [3, 5, 2]}
layers:
  - UpSampling2D: {name: u, size: [2, 3]}
"""


def upsampling_bilinear_odd():
    x = keras.Input((4, 3, 2))
    y = L.UpSampling2D((3, 5), interpolation="bilinear", name="u")(x)
    return x, y, """input: {shape: [4, 3, 2]}
layers:
  - UpSampling2D: {name: u, size: [3, 5], interpolation: bilinear}
"""


def upsampling_bilinear_2():
    x = keras.Input((5, 4, 3))
    y = L.UpSampling2D(2, interpolation="bilinear", name="u")(x)
    return x, y, """input: {shape: [5, 4, 3]}
layers:
  - UpSampling2D: {name: u, interpolation: bilinear}
"""


def squeeze_excitation():
    x = keras.Input((6, 6, 4))
    c = L.Conv2D(4, 3, padding="same", activation="relu", name="c")(x)
    s = L.GlobalAveragePooling2D(keepdims=True, name="gap")(c)
    s = L.Dense(2, activation="relu", name="d1")(s)
    s = L.Dense(4, activation="hard_sigmoid", name="d2")(s)
    m = L.Multiply(name="m")([c, s])
    y = L.GlobalMaxPooling2D(name="gmp")(m)
    return x, y, """input: {shape: [6, 6, 4]}
layers:
  - Conv2D: {name: c, filters: 4, kernel_size: 3, padding: same, activation: relu}
  - GlobalAveragePooling2D: {name: gap, keepdims: true}
  - Dense: {name: d1, units: 2, activation: relu}
  - Dense: {name: d2, units: 4, activation: hard_sigmoid}
  - Multiply: {name: m, inputs: [c, d2]}
  - GlobalMaxPooling2D: {name: gmp}
"""


def multiply_vector():
    x = keras.Input((4, 4, 3))
    c = L.Conv2D(3, 1, name="c")(x)
    v = L.GlobalMaxPooling2D(name="g")(c)
    v = L.Dense(3, name="d")(v)
    y = L.Multiply(name="m")([c, v, c])
    return x, y, """input: {shape: [4, 4, 3]}
layers:
  - Conv2D: {name: c, filters: 3, kernel_size: 1}
  - GlobalMaxPooling2D: {name: g}
  - Dense: {name: d, units: 3}
  - Multiply: {name: m, inputs: [c, d, c]}
"""


def transpose_valid_s2():
    x = keras.Input((4, 5, 3))
    y = L.Conv2DTranspose(4, 3, strides=2, name="t")(x)
    return x, y, """input: {shape: [4, 5, 3]}
layers:
  - Conv2DTranspose: {name: t, filters: 4, kernel_size: 3, strides: 2}
"""


def transpose_same_output_padding():
    x = keras.Input((4, 3, 2))
    y = L.Conv2DTranspose(3, (2, 3), strides=(3, 2), padding="same", output_padding=(1, 0),
                          activation="relu6", name="t")(x)
    return x, y, """input: {shape: [4, 3, 2]}
layers:
  - Conv2DTranspose: {name: t, filters: 3, kernel_size: [2, 3], strides: [3, 2], padding: same, output_padding: [1, 0], activation: relu6}
"""


def transpose_kernel_below_stride():
    x = keras.Input((3, 4, 2))
    h = L.Conv2DTranspose(2, 1, strides=2, name="t1")(x)
    y = L.Conv2DTranspose(3, 2, strides=3, padding="same", name="t2")(h)
    return x, y, """input: {shape: [3, 4, 2]}
layers:
  - Conv2DTranspose: {name: t1, filters: 2, kernel_size: 1, strides: 2}
  - Conv2DTranspose: {name: t2, filters: 3, kernel_size: 2, strides: 3, padding: same}
"""


def autoencoder():
    x = keras.Input((8, 8, 1))
    h = L.Conv2D(4, 3, strides=2, padding="same", activation="relu", name="e1")(x)
    h = L.Conv2D(6, 3, strides=2, padding="same", activation="relu", name="e2")(h)
    h = L.Conv2DTranspose(4, 3, strides=2, padding="same", activation="relu", name="d1",
                          dilation_rate=1)(h)
    h = L.UpSampling2D(2, interpolation="bilinear", name="u")(h)
    y = L.Conv2DTranspose(1, 3, padding="same", dilation_rate=2, activation="sigmoid",
                          name="d2")(h)
    return x, y, """input: {shape: [8, 8, 1]}
layers:
  - Conv2D: {name: e1, filters: 4, kernel_size: 3, strides: 2, padding: same, activation: relu}
  - Conv2D: {name: e2, filters: 6, kernel_size: 3, strides: 2, padding: same, activation: relu}
  - Conv2DTranspose: {name: d1, filters: 4, kernel_size: 3, strides: 2, padding: same, activation: relu}
  - UpSampling2D: {name: u, interpolation: bilinear}
  - Conv2DTranspose: {name: d2, filters: 1, kernel_size: 3, padding: same, dilation_rate: 2, activation: sigmoid}
"""


def grouped_conv2d():
    x = keras.Input((7, 8, 4))
    g1 = L.Conv2D(6, 3, padding="same", groups=2, name="g1")(x)
    g2 = L.Conv2D(6, 1, groups=3, name="g2")(g1)
    h = L.Activation("relu", name="act")(L.Add(name="add")([g1, g2]))
    h = L.MaxPooling2D(2, name="pool")(h)
    y = L.Conv2D(4, (2, 3), groups=2, use_bias=False, activation="tanh", name="g3")(h)
    return x, y, """input: {shape: [7, 8, 4]}
layers:
  - Conv2D: {name: g1, filters: 6, kernel_size: 3, padding: same, groups: 2}
  - Conv2D: {name: g2, filters: 6, kernel_size: 1, groups: 3}
  - Add: {name: add, inputs: [g1, g2]}
  - Activation: {name: act, activation: relu}
  - MaxPooling2D: {name: pool, pool_size: 2}
  - Conv2D: {name: g3, filters: 4, kernel_size: [2, 3], groups: 2, use_bias: false, activation: tanh}
"""


def batch_norm_no_scale():
    x = keras.Input((6, 5, 3))
    h = L.Conv2D(4, 3, padding="same", name="c1")(x)
    h = L.BatchNormalization(scale=False, name="bn1")(h)
    h = L.Activation("relu", name="act")(h)
    h = L.Conv2D(4, 1, name="c2")(h)
    h = L.BatchNormalization(center=False, name="bn2")(h)
    y = L.BatchNormalization(center=False, scale=False, name="bn3")(h)
    return x, y, """input: {shape: [6, 5, 3]}
layers:
  - Conv2D: {name: c1, filters: 4, kernel_size: 3, padding: same}
  - BatchNormalization: {name: bn1, scale: false}
  - Activation: {name: act, activation: relu}
  - Conv2D: {name: c2, filters: 4, kernel_size: 1}
  - BatchNormalization: {name: bn2, center: false}
  - BatchNormalization: {name: bn3, center: false, scale: false}
"""


CASES = [depthwise_same_s2, depthwise_dilated_strided, depthwise_valid_hard_silu,
         padding_cropping, upsampling_nearest, upsampling_bilinear_odd, upsampling_bilinear_2,
         squeeze_excitation, multiply_vector, transpose_valid_s2, transpose_same_output_padding,
         transpose_kernel_below_stride, autoencoder, grouped_conv2d, batch_norm_no_scale]


def write_cases(cases, folder):
    """Writes folder/<case>.safetensors for each case (a function returning the Keras input,
    output and the tfc YAML)."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(42)
    for case in cases:
        inp, out, yaml = case()
        model = keras.Model(inp, out)
        tensors = {}
        for layer in model.layers:
            for w in layer.weights:
                v = rng.uniform(-0.5, 0.5, w.shape).astype(np.float32)
                if w.name == "moving_variance":  # a variance: positive
                    v = rng.uniform(0.5, 1.5, w.shape).astype(np.float32)
                w.assign(v)
                tensors[f"{layer.name}/{w.name}"] = v
        x = rng.uniform(-1, 1, (2,) + tuple(inp.shape[1:])).astype(np.float32)
        y = np.asarray(model(x, training=False), dtype=np.float32)
        tensors["x"] = x
        tensors["y"] = y
        save_file(tensors, os.path.join(folder, case.__name__ + ".safetensors"),
                  metadata={"yaml": yaml})
        print(f"{case.__name__}: x {x.shape} y {y.shape}, {len(tensors) - 2} weights")


def main():
    write_cases(CASES, OUT)


if __name__ == "__main__":
    main()
