#!/usr/bin/env python3
# Writes tests/ref/pipeline/paths.txt for tests/test_pipeline.c: the variable paths and
# shapes Keras 3 gives the layers of a model with Pipelines (keras.layers.Pipeline), one
# `path shape` a line, in Keras's order (model.weights): an unnamed Pipeline holding
# Rescaling, a Dense, a Normalization (its adapt()ed mean, variance and count) and an unnamed
# nested Pipeline (Dense, BatchNormalization), then a named Pipeline of one Dense and a Dense
# outside, the model being the C test's MODEL. Not run by `make test`. To regenerate (Keras
# 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_pipeline.py
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras

L = keras.layers
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pipeline")


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


if __name__ == "__main__":
    main()
