"""Keras 3 references for the regression losses (tests/test_loss_options.c, keras_regression).

Run: KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_losses.py
Writes tests/ref/losses/regression.safetensors: predictions `x` [rows, 5] (values from -4 to
4, so Huber's both branches), targets `t`, and for each of Keras's mse, mae, huber (delta 1)
and log_cosh the batch loss (`sum_over_batch_size`, the mean over the rows of each row's mean)
and its gradient with respect to `x` (jax.grad of the same): `<loss>` and `<loss>_grad`.
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


if __name__ == "__main__":
    main()
