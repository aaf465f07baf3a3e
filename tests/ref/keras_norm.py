#!/usr/bin/env python3
# Writes the Keras parity fixtures of tests/test_norm.c into tests/ref/norm/: one safetensors
# file per case holding its tfc YAML (metadata "yaml"), the input x, Keras 3's inference
# output y, MSE targets t and, for cases without Dropout, the gradients of Keras's MSE loss
# (training mode) with respect to x ("dx") and each weight ("grad:<path>"), and every weight
# under its Keras 3 variable path, which is tfc's name for it. KerasHub's PositionEmbedding
# and TokenAndPositionEmbedding are transcribed below as small Keras layers (their calls for
# inputs no longer than sequence_length, the weights' names and nesting), because KerasHub
# needs TensorFlow, which this environment lacks. Not run by `make test` (Keras is not a CI
# dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_norm.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file



class PositionEmbedding(keras.layers.Layer):
    """keras_hub.layers.PositionEmbedding's weight and call for inputs of up to
    sequence_length steps: the first T rows of `embeddings`, broadcast to the input's shape."""

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.sequence_length = sequence_length
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings", shape=[self.sequence_length, input_shape[-1]],
            initializer=self.initializer, trainable=True)

    def call(self, inputs):
        shape = keras.ops.shape(inputs)
        table = keras.ops.convert_to_tensor(self.position_embeddings)
        table = keras.ops.slice(table, (0, 0), (shape[-2], shape[-1]))
        return keras.ops.broadcast_to(table, shape)

    def compute_output_shape(self, input_shape):
        return input_shape


class TokenAndPositionEmbedding(keras.layers.Layer):
    """keras_hub.layers.TokenAndPositionEmbedding: token_embedding (an Embedding) plus
    position_embedding, the mask of the token embedding."""

    def __init__(self, vocabulary_size, sequence_length, embedding_dim, mask_zero=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.token_embedding = keras.layers.ReversibleEmbedding(
            vocabulary_size, embedding_dim, mask_zero=mask_zero, name="token_embedding")
        self.position_embedding = PositionEmbedding(sequence_length, initializer="uniform",
                                                    name="position_embedding")
        self.embedding_dim = embedding_dim
        self.supports_masking = self.token_embedding.supports_masking

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        self.position_embedding.build(tuple(input_shape) + (self.embedding_dim,))

    def call(self, inputs):
        tokens = self.token_embedding(inputs)
        return tokens + self.position_embedding(tokens)

    def compute_mask(self, inputs, mask=None):
        return self.token_embedding.compute_mask(inputs, mask=mask)


OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "norm")
L = keras.layers


def ln_last():
    x = keras.Input((5, 8))
    y = L.LayerNormalization(name="ln")(x)
    yaml = "input: {shape: [5, 8]}\nlayers:\n  - LayerNormalization: {name: ln}\n"
    return keras.Model(x, y), yaml, 3.0  # inputs centred at 3: the statistics' shift


def ln_axes():
    x = keras.Input((3, 4))
    h = L.LayerNormalization(axis=[1, 2], epsilon=1e-2, name="ln")(x)
    h = L.LayerNormalization(axis=[-2, -1], center=False, name="ln_nc")(h)
    h = L.LayerNormalization(scale=False, name="ln_ns")(h)
    y = L.LayerNormalization(rms_scaling=True, name="ln_rms")(h)
    yaml = ("input: {shape: [3, 4]}\nlayers:\n"
            "  - LayerNormalization: {name: ln, axis: [1, 2], epsilon: 0.01}\n"
            "  - LayerNormalization: {name: ln_nc, axis: [-2, -1], center: false}\n"
            "  - LayerNormalization: {name: ln_ns, scale: false}\n"
            "  - LayerNormalization: {name: ln_rms, rms_scaling: true}\n")
    return keras.Model(x, y), yaml, 0.5


def rms():
    x = keras.Input((4, 6))
    h = L.RMSNormalization(name="rms")(x)
    y = L.RMSNormalization(axis=[1, 2], epsilon=1e-3, name="rms2")(h)
    yaml = ("input: {shape: [4, 6]}\nlayers:\n  - RMSNormalization: {name: rms}\n"
            "  - RMSNormalization: {name: rms2, axis: [1, 2], epsilon: 0.001}\n")
    return keras.Model(x, y), yaml, 0.5


def block():
    """A transformer's feed-forward half on [batch, time, features]: Dense, gelu, Dropout,
    Dense, Add (residual) and LayerNormalization."""
    x = keras.Input((4, 6))
    h = L.Dense(8, name="d1")(x)
    h = L.Activation("gelu", name="act")(h)
    h = L.Dropout(0.25, name="drop")(h)
    h = L.Dense(6, name="d2")(h)
    h = L.Add(name="add")([x, h])
    y = L.LayerNormalization(name="ln")(h)
    yaml = ("input: {shape: [4, 6]}\nlayers:\n  - Dense: {name: d1, units: 8}\n"
            "  - Activation: {name: act, activation: gelu}\n"
            "  - Dropout: {name: drop, rate: 0.25}\n  - Dense: {name: d2, units: 6}\n"
            "  - Add: {name: add, inputs: [input, d2]}\n  - LayerNormalization: {name: ln}\n")
    return keras.Model(x, y), yaml, 0.0


def block_nodrop():
    x = keras.Input((4, 6))
    h = L.Dense(8, activation="gelu", name="d1")(x)
    h = L.Dense(6, name="d2")(h)
    h = L.Add(name="add")([x, h])
    y = L.LayerNormalization(name="ln")(h)
    yaml = ("input: {shape: [4, 6]}\nlayers:\n  - Dense: {name: d1, units: 8, activation: gelu}\n"
            "  - Dense: {name: d2, units: 6}\n  - Add: {name: add, inputs: [input, d2]}\n"
            "  - LayerNormalization: {name: ln}\n")
    return keras.Model(x, y), yaml, 0.0


def position():
    x = keras.Input((5, 4))
    d = L.Dense(4, name="d")(x)
    p = PositionEmbedding(7, name="pos")(d)
    y = L.LayerNormalization(name="ln")(L.Add(name="add")([d, p]))
    yaml = ("input: {shape: [5, 4]}\nlayers:\n  - Dense: {name: d, units: 4}\n"
            "  - PositionEmbedding: {name: pos, sequence_length: 7}\n"
            "  - Add: {name: add, inputs: [d, pos]}\n  - LayerNormalization: {name: ln}\n")
    return keras.Model(x, y), yaml, 0.0


def token_position():
    x = keras.Input((6,), dtype="int32")
    h = TokenAndPositionEmbedding(11, 8, 4, name="tpe")(x)
    y = L.Dense(3, name="out")(h)
    yaml = ("input: {shape: [6], dtype: int32}\nlayers:\n"
            "  - TokenAndPositionEmbedding: {name: tpe, vocabulary_size: 11, sequence_length: 8, "
            "embedding_dim: 4}\n  - Dense: {name: out, units: 3}\n")
    return keras.Model(x, y), yaml, None


CASES = {"ln_last": ln_last, "ln_axes": ln_axes, "rms": rms, "block": block,
         "block_nodrop": block_nodrop, "position": position, "token_position": token_position}
BATCH = 3


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(40)
    for name, make in CASES.items():
        model, yaml, offset = make()
        for v in model.weights:  # weights away from Keras's ones and zeros
            v.assign(rng.uniform(0.5, 1.5, v.shape).astype("float32") if "gamma" in v.path
                     or "scale" in v.path else rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
        shape = (BATCH,) + tuple(model.input_shape[1:])
        if offset is None:  # token ids
            x = rng.integers(0, 11, size=shape).astype("int32")
        else:
            x = (rng.normal(size=shape) + offset).astype("float32")
        y = np.asarray(model(x, training=False))
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = {"x": x, "y": y, "t": t}
        for v in model.weights:
            tensors[v.path] = np.asarray(v.value)
        if not any(isinstance(layer, L.Dropout) for layer in model.layers):
            tv = [v.value for v in model.trainable_variables]
            ntv = [v.value for v in model.non_trainable_variables]

            def loss(tv, xin):
                out, _ = model.stateless_call(tv, ntv, xin, training=True)
                return jnp.mean(jnp.mean(jnp.square(out - t), axis=-1))

            gw, gx = jax.grad(loss, argnums=(0, 1), allow_int=True)(tv, jnp.asarray(x))
            if offset is not None:
                tensors["dx"] = np.asarray(gx)
            for v, g in zip(model.trainable_variables, gw):
                tensors["grad:" + v.path] = np.asarray(g)
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
        print(name, json.dumps({k: list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    main()
