#!/usr/bin/env python3
# Writes tests/ref/keras_signatures.txt: the constructor arguments and defaults of every
# keras.layers class tfc has a layer of (tfc's layer registry, read from docs/layers.md's
# `## Type` headings), one line a layer: the type, then `argument=default` for each argument
# of its __init__ (`<required>` where it has none, the default as Python's repr otherwise;
# self and **kwargs left out); then the same of each optimizer and initializer tfc has
# (`@optimizer.sgd`, `@initializer.he_normal`, ...), and a line `@activations` of `name=written` for each of keras.activations' names and
# the name Keras writes for it into a config. tests/test_keras_args.c holds tfc's schemas against it in
# `make test`, without Keras. Not run by `make test` (Keras is not a CI dependency). To
# regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_signatures.py
import inspect
import os
import re

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

with open(os.path.join(ROOT, "docs", "layers.md")) as f:
    types = re.findall(r"^## (\w+)$", f.read(), re.M)



def signature(cls):
    """`argument=default` for each argument of cls.__init__."""
    args = []
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        d = "<required>" if p.default is inspect.Parameter.empty else repr(p.default)
        args.append(f"{name}={d}")
    return args


# keras.applications' own layers tfc has (ConvNeXt's)
from keras.src.applications.convnext import LayerScale  # noqa: E402
from keras.src.applications.inception_resnet_v2 import CustomScaleLayer  # noqa: E402

APPLICATIONS = {"LayerScale": LayerScale, "CustomScaleLayer": CustomScaleLayer}

lines = [f"# keras {keras.__version__}: written by tests/ref/keras_signatures.py"]
for t in types:
    cls = getattr(keras.layers, t, None) or APPLICATIONS.get(t)
    if cls is None:
        continue  # KerasHub's layers (PositionEmbedding, ...): not in keras.layers
    lines.append("\t".join([t] + signature(cls)))

# the optimizers tfc has, as `@optimizer.<tfc's type>`
for mine, cls in [("sgd", "SGD"), ("adam", "Adam"), ("adamw", "AdamW"), ("rmsprop", "RMSprop"),
                  ("adagrad", "Adagrad"), ("nadam", "Nadam"), ("adamax", "Adamax"),
                  ("lion", "Lion"), ("adadelta", "Adadelta"), ("ftrl", "Ftrl"),
                  ("lamb", "Lamb"), ("adafactor", "Adafactor"), ("muon", "Muon"),
                  ("schedulefreeadamw", "ScheduleFreeAdamW")]:
    lines.append("\t".join([f"@optimizer.{mine}"] + signature(getattr(keras.optimizers, cls))))

# the initializers tfc has, as `@initializer.<name>` (lstm_bias is tfc's own)
for name in ["zeros", "ones", "constant", "glorot_uniform", "glorot_normal", "he_uniform",
             "he_normal", "lecun_uniform", "lecun_normal", "orthogonal", "random_uniform",
             "random_normal", "truncated_normal", "variance_scaling"]:
    cls = type(keras.initializers.get(name)) if name != "constant" else keras.initializers.Constant
    lines.append("\t".join([f"@initializer.{name}"] + signature(cls)))

# keras.activations: each name and the name Keras writes for it into a config (serialize)
acts = sorted(n for n in dir(keras.activations)
              if not n.startswith("_") and n not in ("get", "serialize", "deserialize"))
lines.append("\t".join(["@activations"] + [
    f"{n}={keras.activations.serialize(keras.activations.get(n))}" for n in acts]))

with open(os.path.join(HERE, "keras_signatures.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
nopt = sum(line.startswith("@optimizer.") for line in lines)
ninit = sum(line.startswith("@initializer.") for line in lines)
print(f"{len(lines) - nopt - ninit - 2} layers, {nopt} optimizers, {ninit} initializers, "
      f"{len(acts)} activations")
