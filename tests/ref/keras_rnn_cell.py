#!/usr/bin/env python3
# Writes the Keras parity fixtures of RNN with a cell (LSTMCell, GRUCell, SimpleRNNCell,
# StackedRNNCells; tests/test_rnn_cell.c) into tests/ref/rnn_cell/, in keras_conv_lstm.py's
# format (the tfc YAML in the metadata "yaml"; x, Keras 3's output y, MSE targets t, the MSE
# loss's gradients "dx" (float inputs) and "grad:<path>", every weight), the weights under
# tfc's paths: Keras's with the RNN's cell segment dropped (rnn/lstm_cell/kernel ->
# rnn/kernel); in a StackedRNNCells the stack's segment is dropped and each cell keeps its own,
# Keras's snake case of its type numbered within the stack (rnn/stacked_rnn_cells/lstm_cell_1/
# kernel -> rnn/lstm_cell_1/kernel: the cells are named so here, as tfc names them, since
# Keras numbers them across the whole model). Not run by `make test` (Keras is not a CI
# dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_rnn_cell.py
import json
import os
import re

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rnn_cell")
L = keras.layers
BATCH = 4
IDS = np.array([[3, 1, 4, 1, 5, 0], [9, 2, 6, 5, 3, 5], [7, 9, 0, 0, 0, 0],
                [2, 7, 1, 8, 2, 0]], dtype=np.int32)  # right-padded: 5, 6, 2, 5 steps
SNAKE = {"LSTMCell": "lstm_cell", "GRUCell": "gru_cell", "SimpleRNNCell": "simple_rnn_cell"}


def tfc_path(path):
    parts = path.split("/")
    if any(p.startswith("stacked_rnn_cells") for p in parts):
        return "/".join(p for p in parts if not p.startswith("stacked_rnn_cells"))
    return "/".join(p for p in parts if not re.fullmatch(r"\w*_cell(_\d+)?", p))


def value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(e) for e in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join("%s: %s" % (k, value(e)) for k, e in v.items()) + "}"
    if v is None:
        return "null"
    return str(v)


def cell_of(spec):
    """A cell (type, args) or ("StackedRNNCells", [cells]) as Keras's object and tfc's YAML"""
    t, args = spec
    if t == "StackedRNNCells":
        seen, objs, yamls = {}, [], []
        for ct, cargs in args:
            k = seen.get(ct, 0)
            seen[ct] = k + 1
            name = SNAKE[ct] + ("_%d" % k if k else "")
            objs.append(getattr(L, ct)(name=name, **cargs))
            yamls.append({ct: cargs})
        return L.StackedRNNCells(objs), {t: {"cells": yamls}}
    return getattr(L, t)(**args), {t: args}


def layer_of(t, args):
    args = dict(args)
    if t == "RNN":
        cell, y = cell_of(args.pop("cell"))
        return L.RNN(cell, **args), {"cell": y, **args}
    if t == "Bidirectional":  # the inner RNN named rnn (forward_rnn, backward_rnn) in Keras
        inner_t, inner_args = args.pop("layer")
        inner, y = layer_of(inner_t, inner_args)
        inner.name = "rnn"
        return L.Bidirectional(inner, **args), {"layer": {"RNN": y}, **args}
    return getattr(L, t)(**args), args


def model_of(shape, layers, ids):
    x = keras.Input(shape, dtype="int32" if ids else "float32")
    h = x
    yaml = "input: {shape: %s%s}\nlayers:\n" % (value(list(shape)),
                                               ", dtype: int32" if ids else "")
    for t, args in layers:
        lay, y = layer_of(t, args)
        h = lay(h)
        yaml += "  - %s: %s\n" % (t, value(y))
    return keras.Model(x, h), yaml


EMB = ("Embedding", dict(name="emb", input_dim=10, output_dim=3, mask_zero=True))
CASES = {
    # every step of an LSTMCell
    "lstm_seq": ((5, 3), False, [("RNN", dict(name="rnn", cell=("LSTMCell", dict(units=4)),
                                               return_sequences=True))]),
    # a GRUCell (reset_after false) going backwards, the last output; a Dense after it
    "gru_last_backwards": ((5, 3), False, [
        ("RNN", dict(name="rnn", cell=("GRUCell", dict(units=3, reset_after=False)),
                     go_backwards=True)),
        ("Dense", dict(name="d", units=2))]),
    # a SimpleRNNCell with relu, no bias, unroll
    "simple_relu_seq": ((4, 3), False, [
        ("RNN", dict(name="rnn", cell=("SimpleRNNCell", dict(units=3, activation="relu",
                                                             use_bias=False)),
                     return_sequences=True, unroll=True))]),
    # under an Embedding's mask: zero_output_for_mask, every step
    "lstm_masked_zero": ((6,), True, [
        EMB, ("RNN", dict(name="rnn", cell=("LSTMCell", dict(units=3)), return_sequences=True,
                          zero_output_for_mask=True))]),
    # zero_output_for_mask going backwards, every step and the last output (masked last step)
    "gru_masked_zero_backwards": ((6,), True, [
        EMB, ("RNN", dict(name="rnn", cell=("GRUCell", dict(units=3)), return_sequences=True,
                          go_backwards=True, zero_output_for_mask=True))]),
    "simple_masked_zero_last": ((6,), True, [
        EMB, ("RNN", dict(name="rnn", cell=("SimpleRNNCell", dict(units=3)),
                          zero_output_for_mask=True))]),
    # StackedRNNCells: LSTMCell then GRUCell, every step
    "stacked_seq": ((5, 3), False, [
        ("RNN", dict(name="rnn", cell=("StackedRNNCells", [("LSTMCell", dict(units=4)),
                                                           ("GRUCell", dict(units=3))]),
                     return_sequences=True))]),
    # three cells, two of a type, going backwards under a mask, the last output
    "stacked_masked_backwards": ((6,), True, [
        EMB, ("RNN", dict(name="rnn", cell=("StackedRNNCells", [
            ("GRUCell", dict(units=3)), ("SimpleRNNCell", dict(units=2, activation="tanh")),
            ("GRUCell", dict(units=2))]), go_backwards=True))]),
    # a stack under a mask, every step, zero_output_for_mask
    "stacked_masked_zero": ((6,), True, [
        EMB, ("RNN", dict(name="rnn", cell=("StackedRNNCells", [("LSTMCell", dict(units=3)),
                                                                ("LSTMCell", dict(units=2))]),
                          return_sequences=True, zero_output_for_mask=True))]),
    # Bidirectional around an RNN of an LSTMCell under a mask, and of a stack (sum)
    "bidir_lstm_masked": ((6,), True, [
        EMB, ("Bidirectional", dict(name="bi", layer=("RNN", dict(
            cell=("LSTMCell", dict(units=3)), return_sequences=True))))]),
    "bidir_stacked_sum": ((5, 3), False, [
        ("Bidirectional", dict(name="bi", merge_mode="sum", layer=("RNN", dict(
            cell=("StackedRNNCells", [("GRUCell", dict(units=3)),
                                      ("SimpleRNNCell", dict(units=2))])))))]),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(47)
    for name, (shape, ids, layers) in CASES.items():
        model, yaml = model_of(shape, layers, ids)
        for v in model.weights:
            v.assign(rng.uniform(-0.6, 0.6, v.shape).astype("float32"))
        x = IDS[:, : shape[0]] if ids else rng.normal(size=(BATCH,) + shape).astype("float32")
        y = np.asarray(model(x, training=False))
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = {"x": x, "y": y, "t": t}
        for v in model.weights:
            tensors[tfc_path(v.path)] = np.asarray(v.value)
        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]

        # Keras's loss under the output's mask (a sequence after an Embedding's mask): the
        # mean over the real steps
        m = (x != 0).astype("float32") if ids and y.ndim == 3 else np.ones(y.shape[:-1], "f")

        def loss(tv, xin):
            pred, _ = model.stateless_call(tv, ntv, xin, training=True)
            per = jnp.mean(jnp.square(pred - t), axis=-1)
            return jnp.sum(per * m) / jnp.sum(m)

        if ids:
            gw = jax.grad(loss)(tv, jnp.asarray(x))
        else:
            gw, gx = jax.grad(loss, argnums=(0, 1))(tv, jnp.asarray(x))
            tensors["dx"] = np.asarray(gx)
        for v, g in zip(model.trainable_variables, gw):
            tensors["grad:" + tfc_path(v.path)] = np.asarray(g)
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
        print(name, json.dumps({k: list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    main()
