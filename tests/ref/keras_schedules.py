#!/usr/bin/env python3
# Writes the Keras parity fixture of tfc's Keras-named learning-rate policies
# (tests/test_solver.c, keras_schedules) into tests/ref/optimizers/schedules.safetensors:
# for each case, Keras 3's keras.optimizers.schedules.<Class>(initial_learning_rate=0.1,
# ...) at the steps 0 .. S-1 ("<case>"); the metadata "cases" holds each case's name and its
# tfc `lr_policy:` YAML (base rate 0.1, the optimizer's learning_rate, as Keras's
# initial_learning_rate). Not run by `make test`. To regenerate (Keras 3.15.1 + JAX):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_schedules.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optimizers")
S = 160
K = keras.optimizers.schedules

# (case, Keras class, its arguments beyond initial_learning_rate, tfc's YAML)
CASES = [
    ("exponential", "ExponentialDecay", {"decay_steps": 30, "decay_rate": 0.5},
     "{type: exponential_decay, decay_steps: 30, decay_rate: 0.5}"),
    ("exponential_staircase", "ExponentialDecay",
     {"decay_steps": 25, "decay_rate": 0.3, "staircase": True},
     "{type: ExponentialDecay, decay_steps: 25, decay_rate: 0.3, staircase: true}"),
    ("inverse_time", "InverseTimeDecay", {"decay_steps": 20, "decay_rate": 0.7},
     "{type: inverse_time_decay, decay_steps: 20, decay_rate: 0.7}"),
    ("inverse_time_staircase", "InverseTimeDecay",
     {"decay_steps": 20, "decay_rate": 0.7, "staircase": True},
     "{type: inverse_time_decay, decay_steps: 20, decay_rate: 0.7, staircase: true}"),
    ("polynomial", "PolynomialDecay", {"decay_steps": 100},
     "{type: polynomial_decay, decay_steps: 100}"),
    ("polynomial_power_end", "PolynomialDecay",
     {"decay_steps": 70, "end_learning_rate": 0.01, "power": 2.5},
     "{type: polynomial_decay, decay_steps: 70, end_learning_rate: 0.01, power: 2.5}"),
    ("polynomial_cycle", "PolynomialDecay",
     {"decay_steps": 40, "end_learning_rate": 0.005, "power": 0.5, "cycle": True},
     "{type: PolynomialDecay, decay_steps: 40, end_learning_rate: 0.005, power: 0.5, "
     "cycle: true}"),
    ("cosine", "CosineDecay", {"decay_steps": 120, "alpha": 0.1},
     "{type: CosineDecay, decay_steps: 120, alpha: 0.1}"),
    ("cosine_warmup", "CosineDecay",
     {"decay_steps": 100, "alpha": 0.05, "warmup_target": 0.4, "warmup_steps": 30},
     "{type: CosineDecay, decay_steps: 100, alpha: 0.05, warmup_target: 0.4, "
     "warmup_steps: 30}"),
    ("cosine_warmup_down", "CosineDecay",
     {"decay_steps": 90, "warmup_target": 0.02, "warmup_steps": 15},
     "{type: cosine, decay_steps: 90, warmup_target: 0.02, warmup_steps: 15}"),
    ("cosine_target_only", "CosineDecay",
     {"decay_steps": 120, "alpha": 0.02, "warmup_target": 0.3},
     "{type: CosineDecay, decay_steps: 120, alpha: 0.02, warmup_target: 0.3}"),
    ("restarts", "CosineDecayRestarts", {"first_decay_steps": 20},
     "{type: cosine_decay_restarts, first_decay_steps: 20}"),
    ("restarts_options", "CosineDecayRestarts",
     {"first_decay_steps": 15, "t_mul": 1.0, "m_mul": 0.7, "alpha": 0.05},
     "{type: CosineDecayRestarts, first_decay_steps: 15, t_mul: 1.0, m_mul: 0.7, alpha: 0.05}"),
    ("restarts_geometric", "CosineDecayRestarts",
     {"first_decay_steps": 10, "t_mul": 1.5, "m_mul": 0.9, "alpha": 0.02},
     "{type: cosine_decay_restarts, first_decay_steps: 10, t_mul: 1.5, m_mul: 0.9, "
     "alpha: 0.02}"),
]
PIECEWISE = ("piecewise", {"boundaries": [30, 75, 120], "values": [0.1, 0.05, 0.02, 0.001]},
             "{type: piecewise_constant_decay, boundaries: [30, 75, 120], "
             "values: [0.1, 0.05, 0.02, 0.001]}")


def main():
    tensors, meta = {}, []
    for name, cls, args, yaml in CASES:
        sched = getattr(K, cls)(initial_learning_rate=0.1, **args)
        tensors[name] = np.array([float(sched(s)) for s in range(S)], np.float32)
        meta.append({"name": name, "yaml": yaml})
    name, args, yaml = PIECEWISE
    sched = K.PiecewiseConstantDecay(**args)
    tensors[name] = np.array([float(sched(s)) for s in range(S)], np.float32)
    meta.append({"name": name, "yaml": yaml})
    os.makedirs(OUT, exist_ok=True)
    save_file(tensors, os.path.join(OUT, "schedules.safetensors"),
              metadata={"cases": json.dumps(meta), "S": str(S), "base_lr": "0.1"})
    print(f"{len(meta)} cases of {S} steps")


if __name__ == "__main__":
    main()
