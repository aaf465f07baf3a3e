"""Keras 3 references for the regression losses (tests/test_loss_options.c, keras_regression).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_losses.py (any venv with Keras 3)
Writes tests/ref/losses/regression.safetensors: predictions `x` [rows, 5] (values from -4 to
4, so Huber's both branches), targets `t`, and for each of Keras's mse, mae, huber (delta 1)
and log_cosh the batch loss (`sum_over_batch_size`, the mean over the rows of each row's mean)
and its gradient with respect to `x` (jax.grad of the same): `<loss>` and `<loss>_grad`.
Then tests/ref/losses/elementwise.safetensors (elementwise(), below) for the other
element-wise losses.
"""
import os

import jax
import numpy as np
import keras
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "losses")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(3)
    x = rng.uniform(-4, 4, (23, 5)).astype(np.float32)
    t = rng.uniform(-1, 1, (23, 5)).astype(np.float32)
    x[0, 0] = t[0, 0]  # a zero error: MAE's subgradient 0
    tensors = {"x": x, "t": t}
    for name in ["mse", "mae", "huber", "log_cosh"]:
        loss = keras.losses.get(name)
        f = lambda p: keras.ops.mean(loss(t, p))
        tensors[name] = np.array([f(x)], np.float32)
        tensors[name + "_grad"] = np.asarray(jax.grad(f)(x), np.float32)
        print(name, tensors[name][0])
    save_file(tensors, os.path.join(OUT, "regression.safetensors"))
    elementwise(rng)
    rowwise(np.random.default_rng(5))


def elementwise(rng):
    """tests/ref/losses/elementwise.safetensors: for each of msle, mape, poisson,
    kl_divergence, hinge (0/1 targets, which Keras reads as -1/1, and -1/1 ones: hinge_pm)
    and squared_hinge, its own predictions `<loss>_x` and targets `<loss>_t` [rows, 6], the
    batch loss `<loss>` and its gradient `<loss>_grad`, as in main()."""
    shape = (19, 6)
    u = lambda lo, hi: rng.uniform(lo, hi, shape).astype(np.float32)
    cases = {
        "msle": (u(-0.5, 5), u(0, 5)),  # some predictions below 0: max(x, eps)
        "mape": (u(-3, 3), u(0.2, 2) * np.where(u(0, 1) < 0.3, -1, 1).astype(np.float32)),
        "poisson": (u(0.05, 4), np.floor(u(0, 5))),
        "kl_divergence": (u(-0.2, 1.2), u(0, 0.4)),  # some predictions clipped to [eps, 1]
        "hinge": (u(-2, 2), (u(0, 1) > 0.5).astype(np.float32)),
        "hinge_pm": (u(-2, 2), np.where(u(0, 1) > 0.5, 1, -1).astype(np.float32)),
        "squared_hinge": (u(-2, 2), (u(0, 1) > 0.5).astype(np.float32)),
    }
    tensors = {}
    for name, (x, t) in cases.items():
        loss = keras.losses.get(name.replace("_pm", ""))
        f = lambda p: keras.ops.mean(loss(t, p))
        tensors[name + "_x"], tensors[name + "_t"] = x, t
        tensors[name] = np.array([f(x)], np.float32)
        tensors[name + "_grad"] = np.asarray(jax.grad(f)(x), np.float32)
        print(name, tensors[name][0])
    save_file(tensors, os.path.join(OUT, "elementwise.safetensors"))


def rowwise(rng):
    """tests/ref/losses/rowwise.safetensors, as elementwise(): Huber with delta 0.4 and 2.5
    (huber_d04, huber_d25), the categorical hinge on one-hot targets and on -1/1 ones
    (categorical_hinge_pm), the cosine similarity (a zero target row among them, whose loss
    and gradient are 0)."""
    shape = (17, 6)
    u = lambda lo, hi: rng.uniform(lo, hi, shape).astype(np.float32)
    onehot = np.eye(shape[1], dtype=np.float32)[rng.integers(0, shape[1], shape[0])]
    cos_t = u(-1, 1)
    cos_t[3] = 0
    cases = {
        "huber_d04": (u(-3, 3), u(-1, 1), keras.losses.Huber(delta=0.4)),
        "huber_d25": (u(-6, 6), u(-1, 1), keras.losses.Huber(delta=2.5)),
        "categorical_hinge": (u(-2, 2), onehot, keras.losses.CategoricalHinge()),
        "categorical_hinge_pm": (u(-2, 2), 2 * onehot - 1, keras.losses.CategoricalHinge()),
        "cosine_similarity": (u(-2, 2), cos_t, keras.losses.CosineSimilarity()),
    }
    tensors = {}
    for name, (x, t, loss) in cases.items():
        f = lambda p: loss(t, p)  # sum_over_batch_size: the mean over the rows
        tensors[name + "_x"], tensors[name + "_t"] = x, t
        tensors[name] = np.array([f(x)], np.float32)
        tensors[name + "_grad"] = np.asarray(jax.grad(f)(x), np.float32)
        print(name, tensors[name][0])
    save_file(tensors, os.path.join(OUT, "rowwise.safetensors"))


if __name__ == "__main__":
    main()
