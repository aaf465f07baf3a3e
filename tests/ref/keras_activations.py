"""Keras 3 references for the activation layers, Rescaling and the merges Subtract and Average
(tests/test_vision.c, parity_keras_activations).

Run: KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_activations.py
Writes tests/ref/activations/<case>.safetensors for each case below through keras_vision.py:
the weights under tfc's names (`<layer>/<variable>`), the input `x` [2, ...], Keras's
inference output `y`, and the tfc model YAML in the metadata (`yaml`). Weights are uniform
in [-0.5, 0.5) from a fixed seed (PReLU's alpha too, so some slopes are negative), inputs
uniform in [-1, 1).
"""
import os

import keras
from keras import layers as L

from keras_vision import write_cases

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "activations")


def relu_family():
    """Every argument of ReLU, LeakyReLU and ELU: the ones that are tfc activations
    (ReLU(), relu6, leaky_relu 0.2, elu 1) and the ones that run the pact ops."""
    x = keras.Input((12,))
    h = L.Rescaling(4.0, offset=-0.5, name="r")(x)
    acts = [
        (L.ReLU(max_value=1.5, negative_slope=0.1, threshold=0.25, name="a1"),
         "ReLU: {name: a1, max_value: 1.5, negative_slope: 0.1, threshold: 0.25}"),
        (L.LeakyReLU(name="a2"), "LeakyReLU: {name: a2}"),
        (L.ELU(alpha=0.7, name="a3"), "ELU: {name: a3, alpha: 0.7}"),
        (L.ReLU(name="a4"), "ReLU: {name: a4}"),
        (L.ReLU(max_value=6, name="a5"), "ReLU: {name: a5, max_value: 6}"),
        (L.LeakyReLU(0.2, name="a6"), "LeakyReLU: {name: a6, negative_slope: 0.2}"),
        (L.ELU(name="a7"), "ELU: {name: a7}"),
        (L.ReLU(max_value=2.0, name="a8"), "ReLU: {name: a8, max_value: 2.0}"),
        (L.ReLU(threshold=0.5, name="a9"), "ReLU: {name: a9, threshold: 0.5}"),
        (L.ReLU(negative_slope=0.15, name="a10"), "ReLU: {name: a10, negative_slope: 0.15}"),
        (L.ReLU(negative_slope=0.05, max_value=1.0, name="a11"),
         "ReLU: {name: a11, negative_slope: 0.05, max_value: 1.0}"),
    ]
    yaml = ["  - Rescaling: {name: r, scale: 4.0, offset: -0.5}"]
    for i, (act, line) in enumerate(acts):
        h = L.Dense(16, name=f"d{i}")(h)
        h = act(h)
        yaml.append(f"  - Dense: {{name: d{i}, units: 16}}")
        yaml.append(f"  - {line}")
    h = L.Dense(5, name="out")(h)
    y = L.Softmax(name="sm")(h)
    yaml.append("  - Dense: {name: out, units: 5}")
    yaml.append("  - Softmax: {name: sm}")
    return x, y, "input: {shape: [12]}\nlayers:\n" + "\n".join(yaml) + "\n"


def prelu_image():
    x = keras.Input((5, 6, 3))
    h = L.Rescaling(1 / 127.5, offset=-1, name="r")(x)
    h = L.Conv2D(4, 3, padding="same", name="c1")(h)
    h = L.PReLU(shared_axes=[1, 2], name="p1")(h)
    h = L.Conv2D(4, 3, name="c2")(h)
    h = L.PReLU(name="p2")(h)
    h = L.Conv2D(3, 1, name="c3")(h)
    h = L.ReLU(name="relu")(h)
    h = L.Flatten(name="f")(h)
    y = L.Dense(3, activation="softmax", name="out")(h)
    return x, y, """input: {shape: [5, 6, 3]}
layers:
  - Rescaling: {name: r, scale: 0.00784313725490196, offset: -1}
  - Conv2D: {name: c1, filters: 4, kernel_size: 3, padding: same}
  - PReLU: {name: p1, shared_axes: [1, 2]}
  - Conv2D: {name: c2, filters: 4, kernel_size: 3}
  - PReLU: {name: p2}
  - Conv2D: {name: c3, filters: 3, kernel_size: 1}
  - ReLU: {name: relu}
  - Flatten: {name: f}
  - Dense: {name: out, units: 3, activation: softmax}
"""


def prelu_sequence():
    x = keras.Input((4, 6))
    h = L.Dense(5, name="d1")(x)
    h = L.PReLU(shared_axes=[1], name="p1")(h)
    h = L.Dense(5, name="d2")(h)
    h = L.PReLU(shared_axes=[1, 2], name="p2")(h)
    y = L.Rescaling(0.5, name="r")(h)
    return x, y, """input: {shape: [4, 6]}
layers:
  - Dense: {name: d1, units: 5}
  - PReLU: {name: p1, shared_axes: [1]}
  - Dense: {name: d2, units: 5}
  - PReLU: {name: p2, shared_axes: [1, 2]}
  - Rescaling: {name: r, scale: 0.5}
"""


def merges():
    """Subtract and Average (three inputs: 1/3 is no power of two)."""
    x = keras.Input((6,))
    a = L.Dense(5, activation="tanh", name="a")(x)
    b = L.Dense(5, name="b")(x)
    d = L.Subtract(name="d")([a, b])
    c = L.Dense(5, name="c")(x)
    h = L.Average(name="avg")([d, b, c])
    y = L.Dense(3, name="out")(h)
    return x, y, """input: {shape: [6]}
layers:
  - Dense: {name: a, units: 5, activation: tanh}
  - Dense: {name: b, units: 5, inputs: input}
  - Subtract: {name: d, inputs: [a, b]}
  - Dense: {name: c, units: 5, inputs: input}
  - Average: {name: avg, inputs: [d, b, c]}
  - Dense: {name: out, units: 3}
"""


CASES = [relu_family, prelu_image, prelu_sequence, merges]


def main():
    write_cases(CASES, OUT)


if __name__ == "__main__":
    main()
