#!/usr/bin/env python3
# Writes the Keras parity fixtures of GroupQueryAttention (tests/test_gqa.c) into
# tests/ref/gqa/, in keras_group_norm.py's format: one safetensors file per case holding its
# tfc YAML (metadata "yaml"), the input x, Keras 3's inference output y, MSE targets t, the
# gradients of Keras's MSE loss (training mode) with respect to x ("dx", float inputs) and
# each weight ("grad:<path>"; not for the cases with dropout, whose draws are Keras's), and
# every weight under its Keras 3 variable path. Not run by `make test` (Keras is not a CI
# dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_gqa.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gqa")
L = keras.layers
GQA = L.GroupQueryAttention
TOKENS = "input: {shape: [6], dtype: int32}\nlayers:\n" \
         "  - Embedding: {name: e, input_dim: 12, output_dim: 8, mask_zero: true}\n"


def tokens():
    x = keras.Input((6,), dtype="int32")
    return x, L.Embedding(12, 8, mask_zero=True, name="e")(x)


def self_default_name():
    """Self-attention, 4 query heads sharing 2 key/value heads; the layer unnamed, so its
    weights carry Keras's default name, grouped_query_attention."""
    x = keras.Input((5, 8))
    y = GQA(head_dim=3, num_query_heads=4, num_key_value_heads=2)(x, x)
    return keras.Model(x, y), (
        "input: {shape: [5, 8]}\nlayers:\n"
        "  - GroupQueryAttention: {head_dim: 3, num_query_heads: 4, num_key_value_heads: 2}\n")


def cross():
    """Cross-attention: a query of 6 steps, a value of 3 (a reshape of the input, projected
    to the query's width) and a key apart from it with its own width; 6 query heads over 3."""
    x = keras.Input((6, 4))
    kv = L.Reshape((3, 8), name="kv")(x)
    v = L.Dense(4, name="v")(kv)
    k = L.Dense(5, name="k")(kv)
    y = GQA(2, 6, 3, name="gqa")(x, v, k)
    return keras.Model(x, y), (
        "input: {shape: [6, 4]}\nlayers:\n"
        "  - Reshape: {name: kv, target_shape: [3, 8]}\n"
        "  - Dense: {name: v, units: 4}\n"
        "  - Dense: {name: k, units: 5, inputs: [kv]}\n"
        "  - GroupQueryAttention: {name: gqa, inputs: [input, v, k], head_dim: 2,"
        " num_query_heads: 6, num_key_value_heads: 3}\n")


def causal_mqa():
    """The causal mask with one key/value head (multi-query attention), no biases."""
    x = keras.Input((7, 6))
    h = L.Dense(6, name="d")(x)
    y = GQA(4, 3, 1, use_bias=False, name="gqa")(h, h, use_causal_mask=True)
    return keras.Model(x, y), (
        "input: {shape: [7, 6]}\nlayers:\n  - Dense: {name: d, units: 6}\n"
        "  - GroupQueryAttention: {name: gqa, head_dim: 4, num_query_heads: 3,"
        " num_key_value_heads: 1, use_bias: false, use_causal_mask: true}\n")


def masked_mha():
    """An Embedding's padding mask (keys hidden, the padded rows the mean of the values),
    as many key/value heads as query heads (plain multi-head attention), then the masked
    mean."""
    x, e = tokens()
    h = GQA(3, 2, 2, name="gqa")(e, e)
    y = L.Dense(3, name="d")(L.GlobalAveragePooling1D()(h))
    return keras.Model(x, y), TOKENS + (
        "  - GroupQueryAttention: {name: gqa, head_dim: 3, num_query_heads: 2,"
        " num_key_value_heads: 2}\n"
        "  - GlobalAveragePooling1D: {}\n  - Dense: {name: d, units: 3}\n")


def masked_causal_gate():
    """Padding, the causal mask and the gate, 4 query heads over 2."""
    x, e = tokens()
    h = GQA(2, 4, 2, use_gate=True, name="gqa")(e, e, use_causal_mask=True)
    y = L.Dense(3, name="d")(L.GlobalAveragePooling1D()(h))
    return keras.Model(x, y), TOKENS + (
        "  - GroupQueryAttention: {name: gqa, head_dim: 2, num_query_heads: 4,"
        " num_key_value_heads: 2, use_gate: true, use_causal_mask: true}\n"
        "  - GlobalAveragePooling1D: {}\n  - Dense: {name: d, units: 3}\n")


def window_gate_cross():
    """sliding_window with the causal mask over a query longer than the keys, the gate,
    flash_attention false (a hint)."""
    x = keras.Input((6, 4))
    kv = L.Reshape((3, 8), name="kv")(x)
    v = L.Dense(4, name="v")(kv)
    y = GQA(3, 4, 2, sliding_window=2, use_gate=True, flash_attention=False, name="gqa")(
        x, v, use_causal_mask=True)
    return keras.Model(x, y), (
        "input: {shape: [6, 4]}\nlayers:\n"
        "  - Reshape: {name: kv, target_shape: [3, 8]}\n"
        "  - Dense: {name: v, units: 4}\n"
        "  - GroupQueryAttention: {name: gqa, inputs: [input, v], head_dim: 3,"
        " num_query_heads: 4, num_key_value_heads: 2, sliding_window: 2, use_gate: true,"
        " flash_attention: false, use_causal_mask: true}\n")


def window():
    """sliding_window alone (a symmetric band), 2 query heads over 1."""
    x = keras.Input((6, 8))
    y = GQA(4, 2, 1, sliding_window=2, name="gqa")(x, x)
    return keras.Model(x, y), (
        "input: {shape: [6, 8]}\nlayers:\n"
        "  - GroupQueryAttention: {name: gqa, head_dim: 4, num_query_heads: 2,"
        " num_key_value_heads: 1, sliding_window: 2}\n")


def dropout_masked_causal():
    """Dropout (inference: none) with a seed: Keras's softmax path, where a row that sees no
    key gives zeros; no gradients (Keras's draws)."""
    x, e = tokens()
    h = GQA(2, 4, 2, dropout=0.25, seed=3, name="gqa")(e, e, use_causal_mask=True)
    y = L.Dense(2, name="d")(L.GlobalAveragePooling1D()(h))
    return keras.Model(x, y), TOKENS + (
        "  - GroupQueryAttention: {name: gqa, head_dim: 2, num_query_heads: 4,"
        " num_key_value_heads: 2, dropout: 0.25, seed: 3, use_causal_mask: true}\n"
        "  - GlobalAveragePooling1D: {}\n  - Dense: {name: d, units: 2}\n")


CASES = {"self_default_name": self_default_name, "cross": cross, "causal_mqa": causal_mqa,
         "masked_mha": masked_mha, "masked_causal_gate": masked_causal_gate,
         "window_gate_cross": window_gate_cross, "window": window,
         "dropout_masked_causal": dropout_masked_causal}
BATCH = 3


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(29)
    for name, make in CASES.items():
        model, yaml = make()
        for v in model.weights:
            v.assign(rng.normal(0, 0.5, v.shape).astype("float32"))
        if model.input.dtype == "int32":
            x = rng.integers(1, 12, (BATCH, 6)).astype("int32")
            for b in range(BATCH):
                x[b, 6 - 2 * b:] = 0  # 0, 2 and 4 padded steps
        else:
            x = rng.uniform(-1, 1, (BATCH,) + tuple(model.input_shape[1:])).astype("float32")
        y = np.asarray(model(x, training=False))
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = {"x": x, "y": y, "t": t}
        for v in model.weights:
            tensors[v.path] = np.asarray(v.value)
        if "dropout" not in name:
            tv = [v.value for v in model.trainable_variables]
            ntv = [v.value for v in model.non_trainable_variables]

            def loss(tv, xin):
                out, _ = model.stateless_call(tv, ntv, xin, training=True)
                return jnp.mean(jnp.mean(jnp.square(out - t), axis=-1))

            if x.dtype == np.float32:
                gw, gx = jax.grad(loss, argnums=(0, 1))(tv, jnp.asarray(x))
                tensors["dx"] = np.asarray(gx)
            else:
                gw = jax.grad(loss)(tv, jnp.asarray(x))
            for v, g in zip(model.trainable_variables, gw):
                tensors["grad:" + v.path] = np.asarray(g)
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
        print(name, json.dumps({k: list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    main()
