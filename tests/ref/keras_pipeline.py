#!/usr/bin/env python3
# Writes tests/ref/pipeline/paths.txt for tests/test_pipeline.c: the variable paths and
# shapes Keras 3 gives the layers of a model with Pipelines (keras.layers.Pipeline), one
# `path shape` a line, in Keras's order (model.weights): an unnamed Pipeline holding
# Rescaling, a Dense, a Normalization (its adapt()ed mean, variance and count) and an unnamed
# nested Pipeline (Dense, BatchNormalization), then a named Pipeline of one Dense and a Dense
# outside, the model being the C test's MODEL; and tests/ref/pipeline/model.safetensors, the
# Keras parity fixture of that model without its Normalization (whose adapt state JAX's
# gradient cannot trace) in keras_time_distributed.py's format (its YAML, weights under
# their paths, x, Keras's inference output y, MSE targets t, the gradients of the weights and
# of x in training mode, the non-trainable weights after that step as moved:<path>). Not run
# by `make test`. To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_pipeline.py
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

L = keras.layers
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipeline")


YAML = """input: {shape: [4]}
layers:
  - Pipeline:
      layers:
        - Rescaling: {scale: 2.0}
        - Dense: {units: 3}
        - Pipeline: {layers: [{Dense: {units: 2}}, BatchNormalization]}
  - Pipeline: {name: head, layers: [{Dense: {units: 2}}]}
  - Dense: {units: 1}
loss: mse
"""


def parity():
    """model.safetensors: YAML's model, weights drawn (moving variance, gamma in
    [0.5, 1.5)), a batch of 6, Keras's outputs and gradients."""
    keras.backend.clear_session()
    x = keras.Input((4,))
    y = L.Pipeline([L.Rescaling(2.0), L.Dense(3),
                    L.Pipeline([L.Dense(2), L.BatchNormalization()])])(x)
    y = L.Pipeline([L.Dense(2)], name="head")(y)
    model = keras.Model(x, L.Dense(1)(y))
    rng = np.random.default_rng(3)
    for v in model.weights:
        if "variance" in v.path or "gamma" in v.path:
            v.assign(rng.uniform(0.5, 1.5, v.shape).astype("float32"))
        else:
            v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
    x = rng.normal(size=(6, 4)).astype("float32")
    y = np.asarray(model(x, training=False))
    t = rng.uniform(-1, 1, y.shape).astype("float32")
    tensors = {"x": x, "y": y, "t": t}
    for v in model.weights:
        tensors[v.path] = np.asarray(v.value)
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]

    def loss(tv, xin):
        out, moved = model.stateless_call(tv, ntv, xin, training=True)
        return jnp.mean(jnp.mean(jnp.square(out - t), axis=-1)), moved

    (gw, gx), moved = jax.grad(loss, argnums=(0, 1), has_aux=True)(tv, jnp.asarray(x))
    tensors["dx"] = np.asarray(gx)
    for v, g in zip(model.trainable_variables, gw):
        tensors["grad:" + v.path] = np.asarray(g)
    for v, m in zip(model.non_trainable_variables, moved):
        tensors["moved:" + v.path] = np.asarray(m)
    meta = {"yaml": YAML, "keras": keras.__version__, "backend": keras.backend.backend()}
    save_file(tensors, os.path.join(OUT, "model.safetensors"), metadata=meta)


def main():
    keras.backend.clear_session()  # Keras's default names count from here
    x = keras.Input((4,))
    norm = L.Normalization()
    first = L.Pipeline([L.Rescaling(2.0), L.Dense(3), norm,
                        L.Pipeline([L.Dense(2), L.BatchNormalization()])])
    y = first(x)
    y = L.Pipeline([L.Dense(2)], name="head")(y)
    y = L.Dense(1)(y)
    model = keras.Model(x, y)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "paths.txt"), "w") as f:
        for v in model.weights:
            f.write("%s %s\n" % (v.path, "x".join(str(d) for d in v.shape) or "scalar"))
    print(open(os.path.join(OUT, "paths.txt")).read())
    parity()


if __name__ == "__main__":
    main()
