"""Keras 3 references for recurrent_dropout (tests/test_rnn.c, recurrent_dropout_keras).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_recurrent_dropout.py
Writes tests/ref/recurrent_dropout/<case>.safetensors in tests/util/kerasref.h's form: the
input `x`, Keras's inference output `y`, an MSE target `t`, and after a training forward
the input's gradient `dx` (float inputs) and each weight's `grad:<path>`, with the weights
and the model's YAML. The training forward drops out with the masks tfc draws for it: the
harness runs it with seed 1 at step 0, so layer i's key is tfc_rng_key(1, 0x100000 + i)
(graph.c) and the masks are core/backend.h's (tfc_rnn_dropout_desc): per gate and sequence,
keep = (uniform(tfc_rng_key(key, 1 or 2), 0, (i G + g) f + c) >= rate) / (1 - rate); the
SimpleRNN's input mask is rnn_input's, uniform(key, 0, i f + c). Keras's cells are handed
those masks (their get_dropout_mask and get_recurrent_dropout_mask), so tfc's training
pass must give Keras's numbers; Keras's own draws differ from tfc's in any case.

The cases after masked_backwards give an LSTM or GRU activations other than tanh and
sigmoid, which tfc runs through the same stepped ops in every pass; one without recurrent
dropout drops its input with rnn_input's one mask (Keras's implementation 2: one mask for all
gates). The last two take implementation 1, whose dropout has a mask per gate. Arguments name the cases to write (all are computed, so that the shared random
stream gives every case the same values either way); none: all.
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import keras
from keras import layers as L
from safetensors.numpy import save_file

from keras_augment_persp import philox

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recurrent_dropout")
M64 = 0xFFFFFFFFFFFFFFFF
BATCH = 3


def rng_key(seed, stream):
    """core/rng.h's tfc_rng_key (splitmix64's finaliser)"""
    z = (seed * 0x9E3779B97F4A7C15 + stream + 0x632BE59BD9B4E019) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def keep(key, n, f, rate):
    """keep[i, c] of n f draws of stream (key, step 0), float32 as tfc makes them"""
    v = np.empty(n * f, np.float32)
    for k in range(n * f):
        v[k] = np.float32((philox(key, k >> 2, 0)[k & 3] >> 8) * (1.0 / 16777216.0))
    scale = np.float32(1) / (np.float32(1) - np.float32(rate))
    return np.where(v >= np.float32(rate), scale, np.float32(0)).reshape(n, f)


def gate_masks(key, n, gates, f, rate):
    """[mask of gate g (n, f)] from draws (i G + g) f + c"""
    m = keep(key, n, gates * f, rate).reshape(n, gates, f)
    return [jnp.asarray(m[:, g]) for g in range(gates)]


def hand_masks(layer, index):
    """Gives the layer's cell tfc's masks for a batch of BATCH (layer `index` of the model)"""
    cell = layer.cell
    key = rng_key(1, 0x100000 + index)
    gates = {"LSTMCell": 4, "GRUCell": 3}.get(type(cell).__name__, 1)
    units, f = cell.units, cell.kernel.shape[0]
    if gates > 1 and cell.implementation == 2:  # one input mask (no recurrent_dropout)
        rec = None
        inp = jnp.asarray(keep(key, BATCH, f, cell.dropout)) if cell.dropout else None
    elif gates > 1:
        rec = gate_masks(rng_key(key, 2), BATCH, gates, units, cell.recurrent_dropout)
        inp = gate_masks(rng_key(key, 1), BATCH, gates, f, cell.dropout) if cell.dropout else None
    else:
        rec = gate_masks(rng_key(key, 2), BATCH, 1, units, cell.recurrent_dropout)[0]
        inp = jnp.asarray(keep(key, BATCH, f, cell.dropout)) if cell.dropout else None
    cell.get_recurrent_dropout_mask = lambda h: rec
    cell.get_dropout_mask = lambda x: inp


CASES = {
    "lstm": ("input: {shape: [6, 4]}\nlayers:\n  - LSTM: {units: 5, dropout: 0.25, "
             "recurrent_dropout: 0.4, return_sequences: true}\n",
             lambda: [keras.Input((6, 4)),
                      L.LSTM(5, dropout=0.25, recurrent_dropout=0.4, return_sequences=True)]),
    "gru": ("input: {shape: [6, 4]}\nlayers:\n  - GRU: {units: 5, dropout: 0.3, "
            "recurrent_dropout: 0.5}\n",
            lambda: [keras.Input((6, 4)), L.GRU(5, dropout=0.3, recurrent_dropout=0.5)]),
    "gru_reset_before": ("input: {shape: [5, 3]}\nlayers:\n  - GRU: {units: 4, reset_after: "
                         "false, recurrent_dropout: 0.3, return_sequences: true}\n",
                         lambda: [keras.Input((5, 3)),
                                  L.GRU(4, reset_after=False, recurrent_dropout=0.3,
                                        return_sequences=True)]),
    "simple_rnn": ("input: {shape: [6, 4]}\nlayers:\n  - SimpleRNN: {units: 4, dropout: 0.2, "
                   "recurrent_dropout: 0.4, return_sequences: true}\n",
                   lambda: [keras.Input((6, 4)),
                            L.SimpleRNN(4, dropout=0.2, recurrent_dropout=0.4,
                                        return_sequences=True)]),
    # masked steps (right padding), backwards, a second layer after it (layer index 2)
    "masked_backwards": ("input: {shape: [7], dtype: int32}\nlayers:\n"
                         "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                         "  - GRU: {units: 4, recurrent_dropout: 0.3, go_backwards: true, "
                         "return_sequences: true}\n"
                         "  - LSTM: {units: 3, dropout: 0.2, recurrent_dropout: 0.35}\n",
                         lambda: [keras.Input((7,), dtype="int32"),
                                  L.Embedding(10, 3, mask_zero=True),
                                  L.GRU(4, recurrent_dropout=0.3, go_backwards=True,
                                        return_sequences=True),
                                  L.LSTM(3, dropout=0.2, recurrent_dropout=0.35)]),
    # other activations (the stepped ops in every pass)
    "lstm_relu": ("input: {shape: [6, 4]}\nlayers:\n  - LSTM: {units: 5, activation: relu, "
                  "recurrent_activation: hard_sigmoid, dropout: 0.25, recurrent_dropout: 0.3, "
                  "return_sequences: true}\n",
                  lambda: [keras.Input((6, 4)),
                           L.LSTM(5, activation="relu", recurrent_activation="hard_sigmoid",
                                  dropout=0.25, recurrent_dropout=0.3, return_sequences=True)]),
    "gru_gelu": ("input: {shape: [6, 4]}\nlayers:\n  - GRU: {units: 4, activation: gelu, "
                 "return_sequences: true}\n",
                 lambda: [keras.Input((6, 4)),
                          L.GRU(4, activation="gelu", return_sequences=True)]),
    "gru_before_swish": ("input: {shape: [5, 3]}\nlayers:\n  - GRU: {units: 4, reset_after: "
                         "false, activation: swish, recurrent_activation: softsign, "
                         "dropout: 0.2}\n",
                         lambda: [keras.Input((5, 3)),
                                  L.GRU(4, reset_after=False, activation="swish",
                                        recurrent_activation="softsign", dropout=0.2)]),
    "masked_any": ("input: {shape: [7], dtype: int32}\nlayers:\n"
                   "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                   "  - LSTM: {units: 4, activation: elu, go_backwards: true, "
                   "return_sequences: true}\n"
                   "  - GRU: {units: 3, activation: null, recurrent_activation: relu, "
                   "recurrent_dropout: 0.25}\n",
                   lambda: [keras.Input((7,), dtype="int32"),
                            L.Embedding(10, 3, mask_zero=True),
                            L.LSTM(4, activation="elu", go_backwards=True,
                                   return_sequences=True),
                            L.GRU(3, activation=None, recurrent_activation="relu",
                                  recurrent_dropout=0.25)]),
    # implementation 1 (Keras 3 pops it from its kwargs): dropout with a mask per gate
    # without recurrent_dropout; Keras 3.15 trains it only with use_cudnn=False (its default
    # "auto" tries the fused path, which broadcasts the four masks as one and fails)
    "lstm_implementation1": ("input: {shape: [6, 4]}\nlayers:\n  - LSTM: {units: 5, "
                             "dropout: 0.3, implementation: 1, use_cudnn: false, "
                             "return_sequences: true}\n",
                             lambda: [keras.Input((6, 4)),
                                      L.LSTM(5, dropout=0.3, implementation=1,
                                             use_cudnn=False, return_sequences=True)]),
    "gru_implementation1": ("input: {shape: [6, 4]}\nlayers:\n  - GRU: {units: 4, "
                            "dropout: 0.35, implementation: 1, use_cudnn: false, "
                            "go_backwards: true}\n",
                            lambda: [keras.Input((6, 4)),
                                     L.GRU(4, dropout=0.35, implementation=1,
                                           use_cudnn=False, go_backwards=True)]),
}


def path(v):
    """tfc's name: the model's segment and the cell's dropped"""
    return "/".join(p for p in v.path.split("/")[1:] if not p.endswith("_cell"))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(29)
    for name, (yaml, make) in CASES.items():
        keras.backend.clear_session()  # default names from lstm, gru again
        stack = make()
        model = keras.Sequential(stack)
        for i, layer in enumerate(model.layers):
            if hasattr(layer, "cell"):
                hand_masks(layer, i)
        for v in model.weights:
            v.assign(rng.uniform(-0.6, 0.6, v.shape).astype("float32"))
        shape = (BATCH,) + tuple(model.input_shape[1:])
        if model.inputs[0].dtype == "int32":
            x = rng.integers(1, 10, size=shape).astype("int32")
            for b, n in enumerate([7, 4, 2]):
                x[b, n:] = 0
        else:
            x = rng.uniform(-1, 1, size=shape).astype("float32")
        y = np.asarray(model(x, training=False))
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = {"x": x, "y": y, "t": t}
        for v in model.weights:
            tensors[path(v)] = np.asarray(v.value)
        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]

        def loss(tv, xin):
            out, _ = model.stateless_call(tv, ntv, xin, training=True)
            return jnp.mean(jnp.mean(jnp.square(out - t), axis=-1))

        if x.dtype == np.int32:
            gw = jax.grad(loss)(tv, jnp.asarray(x))
        else:
            gw, gx = jax.grad(loss, argnums=(0, 1))(tv, jnp.asarray(x))
            tensors["dx"] = np.asarray(gx)
        for v, g in zip(model.trainable_variables, gw):
            tensors["grad:" + path(v)] = np.asarray(g)
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        if len(sys.argv) > 1 and name not in sys.argv[1:]:
            continue
        save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
        print(name, sorted(tensors))


if __name__ == "__main__":
    main()
