#!/usr/bin/env python3
# Writes the Keras parity fixture of tfc's optimizers (tests/test_solver.c, keras_optimizers)
# into tests/ref/optimizers/optimizers.safetensors: for each case, a vector of weights w0,
# T gradients g (one per update), Keras 3's weights after each update ("w") and its slot
# variables after the last ("slot:<name>"), under "<case>/..."; the metadata "cases" holds
# each case's name, its tfc `optimizer:` YAML, which is the Keras optimizer's constructor,
# and keras.optimizers.serialize's JSON of that optimizer (tfc reads that form too).
# The gradients include exact zeros (Lion's sign(0) = 0) and span magnitudes from 1e-4 to 10.
# A second file, optimizer_vars.safetensors, holds the per-variable rules (lamb, adafactor)
# over several variables of different shapes at once (a zero weight, a zero gradient, ranks
# 1 to 3, and folds with one row or one column), laid out as tfc's arena: the variables
# flattened one after another, and Adafactor's r and c each at its variable's offset padded
# with zeros to the variable's size (tfc's slot layout, core/backend.h).
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
           "adadelta": "Adadelta", "ftrl": "Ftrl", "lamb": "Lamb", "adafactor": "Adafactor",
           "muon": "Muon", "schedulefreeadamw": "ScheduleFreeAdamW"}

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
    ("adam_clipvalue", "adam", {"learning_rate": 0.01, "clipvalue": 0.5}),
    ("sgd_clipvalue", "sgd", {"learning_rate": 0.1, "momentum": 0.9, "clipvalue": 1.0}),
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
    ("schedulefreeadamw", "schedulefreeadamw", {}),
    ("schedulefreeadamw_options", "schedulefreeadamw",
     {"learning_rate": 0.01, "beta_1": 0.8, "beta_2": 0.99, "epsilon": 1e-6,
      "warmup_steps": 3, "weight_decay": 0.1}),
    ("lamb", "lamb", {}),
    ("lamb_clipvalue", "lamb", {"clipvalue": 0.2}),
    ("lamb_options", "lamb", {"learning_rate": 0.01, "beta_1": 0.8, "beta_2": 0.99,
                              "epsilon": 1e-5, "weight_decay": 0.1}),
    ("adafactor", "adafactor", {}),
    ("adafactor_options", "adafactor", {"learning_rate": 0.01, "beta_2_decay": -0.5,
                                        "epsilon_1": 1e-20, "epsilon_2": 1e-2,
                                        "clip_threshold": 0.5, "relative_step": False,
                                        "weight_decay": 0.1}),
    ("muon", "muon", {}),
    ("muon_options", "muon", {"learning_rate": 0.02, "adam_beta_1": 0.8, "adam_beta_2": 0.99,
                              "adam_weight_decay": 0.01, "weight_decay": 0.1,
                              "exclude_layers": ["hea+d"], "momentum": 0.9, "ns_steps": 3,
                              "nesterov": False, "adam_lr_ratio": 0.5, "rms_rate": None}),
]

# The per-variable fixture: shapes in arena order, and its cases
VAR_SHAPES = [(4, 6), (6,), (2, 3, 5), (1, 7), (3, 1), (5,)]
# their Keras paths (layer/weight): muon takes AdamW for embedding/... and, in its options
# case, for head/... (exclude_layers); the rank-2 others are its matrices
VAR_PATHS = ["dense/kernel", "dense/bias", "conv/kernel", "embedding/embeddings", "head/kernel",
             "norm/gamma"]
VAR_CASES = [c for c in CASES if c[1] in ("lamb", "adafactor", "muon")]
# Keras's slot lists per per-variable kind: tfc's slot name, the optimizer's attribute
SLOT_LISTS = {"lamb": [("momentum", "_momentums"), ("velocity", "_velocities")],
              "adafactor": [("r", "_r"), ("c", "_c"), ("velocity", "_v")],
              "muon": [("momentum", "momentums"), ("velocity", "adam_velocities")]}


def yaml_of(kind, args):
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(f'"{x}"' for x in v) + "]"
        return "null" if v is None else repr(v)
    return "{" + ", ".join([f"type: {kind}"] + [f"{k}: {val(v)}" for k, v in args.items()]) + "}"


def slots_of(opt, kind, variables):
    """Keras's slot variables by tfc's slot name, each flattened in tfc's arena layout."""
    if kind in SLOT_LISTS:  # read by list: adafactor's r and c are named after the variable
        out = {}
        for name, attr in SLOT_LISTS[kind]:
            parts = []
            for v, var in zip(getattr(opt, attr), variables):
                n = int(np.prod(var.shape))
                # a rank-1 variable's scalar 0 (adafactor), no velocity (muon's matrices)
                a = np.zeros(0, np.float32) if v is None else np.asarray(v.value, np.float32)
                parts.append(np.pad(a.reshape(-1), (0, n - a.size)))
            out[name] = np.concatenate(parts)
        return out
    out = {}
    for v in opt.variables:
        vname = v.path.split("/")[-1]
        if vname in ("iteration", "learning_rate"):
            continue
        var, _, slot = vname.partition("_")
        out.setdefault(slot, {})[var] = np.asarray(v.value, np.float32).reshape(-1)
    return {slot: np.concatenate([d[var.name] for var in variables])
            for slot, d in out.items()}


def main_vars():
    rng = np.random.default_rng(11)
    sizes = [int(np.prod(s)) for s in VAR_SHAPES]
    w0 = [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in VAR_SHAPES]
    w0[5][:] = 0  # a zero weight: lamb's ratio and adafactor's RMS fall back
    g = []
    for t in range(T):
        gt = [(rng.standard_normal(s) * 10.0 ** rng.uniform(-3, 0.5, s)).astype(np.float32)
              for s in VAR_SHAPES]
        gt[1][:] = 0  # a variable without a gradient
        g.append(gt)
    tensors, meta = {}, []
    for name, kind, args in VAR_CASES:
        opt = getattr(keras.optimizers, CLASSES[kind])(**args)
        variables = []
        for path, w in zip(VAR_PATHS, w0):
            with keras.name_scope(path.split("/")[0]):
                variables.append(keras.Variable(w.copy(), name=path.split("/")[1]))
        opt.build(variables)
        ws = []
        for t in range(T):
            opt.apply_gradients([(keras.ops.convert_to_tensor(g[t][k]), variables[k])
                                 for k in range(len(variables))])
            ws.append(np.concatenate([np.asarray(v.value).reshape(-1) for v in variables]))
        tensors[f"{name}/w"] = np.stack(ws).astype(np.float32)
        for slot, a in slots_of(opt, kind, variables).items():
            tensors[f"{name}/slot:{slot}"] = a
        meta.append({"name": name, "yaml": yaml_of(kind, args)})
    tensors["w0"] = np.concatenate([w.reshape(-1) for w in w0])
    tensors["g"] = np.stack([np.concatenate([x.reshape(-1) for x in gt]) for gt in g])
    save_file(tensors, os.path.join(OUT, "optimizer_vars.safetensors"),
              metadata={"cases": json.dumps(meta), "T": str(T), "N": str(sum(sizes)),
                        "shapes": json.dumps([list(s) for s in VAR_SHAPES]),
                        "paths": json.dumps(VAR_PATHS)})
    print(f"{len(VAR_CASES)} per-variable cases over {len(VAR_SHAPES)} variables")


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
        if kind in SLOT_LISTS:
            for slot, a in slots_of(opt, kind, [var]).items():
                tensors[f"{name}/slot:{slot}"] = a
        for v in opt.variables if kind not in SLOT_LISTS else []:
            vname = v.path.split("/")[-1]
            if vname in ("iteration", "learning_rate"):
                continue
            if vname.startswith("w_"):  # a slot of the variable w: Keras's w_<slot>
                vname = vname[2:]
            elif kind == "nadam":  # Nadam's scalar product of the momentum schedule
                vname = "u_product"
            tensors[f"{name}/slot:{vname}"] = np.asarray(v.value, np.float32).reshape(-1)
        # Keras's own serialized form of the optimizer, which tfc reads as well
        meta.append({"name": name, "yaml": yaml_of(kind, args),
                     "serialized": json.dumps(keras.optimizers.serialize(opt))})
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
    main_vars()
