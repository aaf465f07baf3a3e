#!/usr/bin/env python3
# Writes the Keras parity fixture of tfc's optimizers (tests/test_solver.c, keras_optimizers)
# into tests/ref/optimizers/optimizers.safetensors: for each case, a vector of weights w0,
# T gradients g (one per update), Keras 3's weights after each update ("w") and its slot
# variables after the last ("slot:<name>"), under "<case>/..."; the metadata "cases" holds
# each case's name and its tfc `optimizer:` YAML, which is the Keras optimizer's constructor.
# The gradients include exact zeros (Lion's sign(0) = 0) and span magnitudes from 1e-4 to 10.
# Not run by `make test` (Keras is not a CI dependency). To regenerate (Keras 3.15.1 + JAX):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_optimizers.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optimizers")
N, T = 24, 6
CLASSES = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "rmsprop": "RMSprop",
           "adagrad": "Adagrad", "nadam": "Nadam", "adamax": "Adamax", "lion": "Lion",
           "adadelta": "Adadelta", "ftrl": "Ftrl"}

# (case name, tfc type, constructor arguments)
CASES = [
    ("sgd", "sgd", {}),
    ("sgd_momentum", "sgd", {"momentum": 0.9}),
    ("sgd_nesterov_decay", "sgd", {"learning_rate": 0.1, "momentum": 0.8, "nesterov": True,
                                   "weight_decay": 0.05}),
    ("adam", "adam", {}),
    ("adam_amsgrad", "adam", {"learning_rate": 0.01, "amsgrad": True}),
    ("adam_decay", "adam", {"learning_rate": 0.01, "weight_decay": 0.1}),
    ("adamw", "adamw", {"learning_rate": 0.01, "weight_decay": 0.1}),
    ("rmsprop", "rmsprop", {}),
    ("rmsprop_centered", "rmsprop", {"learning_rate": 0.01, "momentum": 0.5, "centered": True,
                                     "weight_decay": 0.02}),
    ("adagrad", "adagrad", {"learning_rate": 0.05}),
    ("nadam", "nadam", {}),
    ("nadam_options", "nadam", {"learning_rate": 0.01, "beta_1": 0.8, "beta_2": 0.99,
                                "epsilon": 1e-5, "weight_decay": 0.1}),
    ("adamax", "adamax", {}),
    ("adamax_options", "adamax", {"learning_rate": 0.02, "beta_1": 0.7, "beta_2": 0.9,
                                  "epsilon": 1e-4}),
    ("lion", "lion", {}),
    ("lion_options", "lion", {"learning_rate": 0.01, "beta_1": 0.95, "beta_2": 0.98,
                              "weight_decay": 0.1}),
    ("adadelta", "adadelta", {}),
    ("adadelta_options", "adadelta", {"learning_rate": 1.0, "rho": 0.9, "epsilon": 1e-6}),
    ("ftrl", "ftrl", {}),
    ("ftrl_options", "ftrl", {"learning_rate": 0.1, "learning_rate_power": -0.7,
                              "initial_accumulator_value": 0.5,
                              "l1_regularization_strength": 0.01,
                              "l2_regularization_strength": 0.02,
                              "l2_shrinkage_regularization_strength": 0.03, "beta": 0.1}),
]


def yaml_of(kind, args):
    def val(v):
        return ("true" if v else "false") if isinstance(v, bool) else repr(v)
    return "{" + ", ".join([f"type: {kind}"] + [f"{k}: {val(v)}" for k, v in args.items()]) + "}"


def main():
    rng = np.random.default_rng(7)
    w0 = (rng.standard_normal(N) * 0.5).astype(np.float32)
    mags = 10.0 ** rng.uniform(-4, 1, (T, N))
    g = (rng.choice([-1.0, 1.0], (T, N)) * mags).astype(np.float32)
    g[:, :3] = 0  # never a gradient: what each optimizer does to an idle weight
    g[2, 5:9] = 0  # a zero amid others
    tensors, meta = {}, []
    for name, kind, args in CASES:
        opt = getattr(keras.optimizers, CLASSES[kind])(**args)
        var = keras.Variable(w0.copy(), name="w")
        opt.build([var])
        ws = []
        for t in range(T):
            opt.apply_gradients([(keras.ops.convert_to_tensor(g[t]), var)])
            ws.append(np.asarray(var.value))
        tensors[f"{name}/w"] = np.stack(ws).astype(np.float32)
        for v in opt.variables:
            vname = v.path.split("/")[-1]
            if vname in ("iteration", "learning_rate"):
                continue
            if vname.startswith("w_"):  # a slot of the variable w: Keras's w_<slot>
                vname = vname[2:]
            elif kind == "nadam":  # Nadam's scalar product of the momentum schedule
                vname = "u_product"
            tensors[f"{name}/slot:{vname}"] = np.asarray(v.value, np.float32).reshape(-1)
        meta.append({"name": name, "yaml": yaml_of(kind, args)})
    tensors["w0"] = w0
    tensors["g"] = g
    os.makedirs(OUT, exist_ok=True)
    save_file(tensors, os.path.join(OUT, "optimizers.safetensors"),
              metadata={"cases": json.dumps(meta), "T": str(T), "N": str(N)})
    print(f"{len(CASES)} cases, {len(tensors)} tensors")
    for k in sorted(tensors):
        if "slot:" in k:
            print(" ", k, tensors[k].shape)


if __name__ == "__main__":
    main()
