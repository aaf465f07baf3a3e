#!/usr/bin/env python3
# Writes the Keras parity fixtures of Attention and AdditiveAttention (tests/test_score_attention.c)
# into tests/ref/score_attention/, in keras_group_norm.py's format: one safetensors file per
# case holding its tfc YAML (metadata "yaml"), the input x, Keras 3's inference output y, MSE
# targets t, the gradients of Keras's MSE loss (training mode) with respect to x ("dx", float
# inputs) and each weight ("grad:<path>"; not for the cases with dropout), and every weight
# under its Keras 3 variable path. Not run by `make test` (Keras is not a CI dependency).
# To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_attention_layers.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "score_attention")
L = keras.layers
TOKENS = "input: {shape: [6], dtype: int32}\nlayers:\n" \
         "  - Embedding: {name: e, input_dim: 12, output_dim: 8, mask_zero: true}\n"


def tokens():
    x = keras.Input((6,), dtype="int32")
    return x, L.Embedding(12, 8, mask_zero=True, name="e")(x)


def self_dot_masked():
    """Self-attention over an Embedding's padding mask (keys hidden, padded rows zeroed),
    then the masked mean."""
    x, e = tokens()
    h = L.Attention(name="att")([e, e])
    y = L.Dense(3, name="d")(L.GlobalAveragePooling1D()(h))
    return keras.Model(x, y), TOKENS + (
        "  - Attention: {name: att, inputs: [e, e]}\n"
        "  - GlobalAveragePooling1D: {}\n  - Dense: {name: d, units: 3}\n")


def self_scale_causal():
    """use_scale and use_causal_mask, the query a projection of the embedding."""
    x, e = tokens()
    q = L.Dense(8, name="q")(e)
    h = L.Attention(use_scale=True, name="att")([q, e], use_causal_mask=True)
    y = L.Dense(3, name="d")(L.GlobalAveragePooling1D()(h))
    return keras.Model(x, y), TOKENS + (
        "  - Dense: {name: q, units: 8}\n"
        "  - Attention: {name: att, inputs: [q, e], use_scale: true, use_causal_mask: true}\n"
        "  - GlobalAveragePooling1D: {}\n  - Dense: {name: d, units: 3}\n")


def concat_masked():
    """score_mode concat with and without use_scale, over the padding mask."""
    x, e = tokens()
    h = L.Attention(score_mode="concat", name="att")([e, e])
    h = L.Attention(score_mode="concat", use_scale=True, name="att2")([h, e])
    y = L.Dense(2, name="d")(L.GlobalMaxPooling1D()(h))
    return keras.Model(x, y), TOKENS + (
        "  - Attention: {name: att, inputs: [e, e], score_mode: concat}\n"
        "  - Attention: {name: att2, inputs: [att, e], score_mode: concat, use_scale: true}\n"
        "  - GlobalMaxPooling1D: {}\n  - Dense: {name: d, units: 2}\n")


def cross_key():
    """Cross-attention: a query of 6 steps, a value of 3 (a reshape of the input) with its
    own width, and a key apart from the value (without a bias: its gradient would be 0)."""
    x = keras.Input((6, 4))
    kv = L.Reshape((3, 8), name="kv")(x)
    q = L.Dense(5, name="q")(x)
    k = L.Dense(5, use_bias=False, name="k")(kv)  # a key bias moves no dot-product score
    v = L.Dense(7, name="v")(kv)
    h = L.Attention(use_scale=True, name="att")([q, v, k])
    y = L.Dense(2, name="d")(L.Flatten()(h))
    return keras.Model(x, y), (
        "input: {shape: [6, 4]}\nlayers:\n"
        "  - Reshape: {name: kv, target_shape: [3, 8]}\n"
        "  - Dense: {name: q, units: 5, inputs: [input]}\n"
        "  - Dense: {name: k, units: 5, use_bias: false, inputs: [kv]}\n"
        "  - Dense: {name: v, units: 7, inputs: [kv]}\n"
        "  - Attention: {name: att, inputs: [q, v, k], use_scale: true}\n"
        "  - Flatten: {}\n  - Dense: {name: d, units: 2}\n")


def additive_masked():
    """AdditiveAttention (its [dim] scale) over the padding mask, a narrower value (the
    embedding the key)."""
    x, e = tokens()
    v = L.Dense(5, name="v")(e)
    h = L.AdditiveAttention(name="add")([e, v, e])
    y = L.Dense(3, name="d")(L.GlobalAveragePooling1D()(h))
    return keras.Model(x, y), TOKENS + (
        "  - Dense: {name: v, units: 5}\n"
        "  - AdditiveAttention: {name: add, inputs: [e, v, e]}\n"
        "  - GlobalAveragePooling1D: {}\n  - Dense: {name: d, units: 3}\n")


def additive_cross_causal():
    """AdditiveAttention without a scale, a key apart from the value, a causal mask over a
    query longer than the keys."""
    x = keras.Input((6, 4))
    kv = L.Reshape((3, 8), name="kv")(x)
    q = L.Dense(6, name="q")(x)
    k = L.Dense(6, name="k")(kv)
    h = L.AdditiveAttention(use_scale=False, name="add")([q, kv, k], use_causal_mask=True)
    y = L.Dense(2, name="d")(L.Flatten()(h))
    return keras.Model(x, y), (
        "input: {shape: [6, 4]}\nlayers:\n"
        "  - Reshape: {name: kv, target_shape: [3, 8]}\n"
        "  - Dense: {name: q, units: 6, inputs: [input]}\n"
        "  - Dense: {name: k, units: 6, inputs: [kv]}\n"
        "  - AdditiveAttention: {name: add, inputs: [q, kv, k], use_scale: false,"
        " use_causal_mask: true}\n"
        "  - Flatten: {}\n  - Dense: {name: d, units: 2}\n")


def dropout_masked():
    """Dropout (inference: none) with a seed, both layers; no gradients (Keras's draws)."""
    x, e = tokens()
    h = L.Attention(dropout=0.3, seed=5, name="att")([e, e], use_causal_mask=True)
    h = L.AdditiveAttention(dropout=0.2, name="add")([h, e])
    y = L.Dense(2, name="d")(L.GlobalAveragePooling1D()(h))
    return keras.Model(x, y), TOKENS + (
        "  - Attention: {name: att, inputs: [e, e], dropout: 0.3, seed: 5,"
        " use_causal_mask: true}\n"
        "  - AdditiveAttention: {name: add, inputs: [att, e], dropout: 0.2}\n"
        "  - GlobalAveragePooling1D: {}\n  - Dense: {name: d, units: 2}\n")


CASES = {"self_dot_masked": self_dot_masked, "self_scale_causal": self_scale_causal,
         "concat_masked": concat_masked, "cross_key": cross_key,
         "additive_masked": additive_masked, "additive_cross_causal": additive_cross_causal,
         "dropout_masked": dropout_masked}
BATCH = 3


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(23)
    for name, make in CASES.items():
        model, yaml = make()
        for v in model.weights:  # the scalars away from Keras's ones
            if v.path.endswith("/scale") or v.path.endswith("concat_score_weight"):
                v.assign(rng.uniform(0.5, 1.5, v.shape).astype("float32"))
            else:
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
