#!/usr/bin/env python3
# Writes the Keras parity fixtures of tests/test_rnn.c into tests/ref/rnn/ (GRU, LSTM,
# SimpleRNN, Bidirectional): one safetensors file per case holding the input "x", Keras's
# output "y", every weight under tfc's name (Keras 3's variable path with the recurrent
# cell's own segment dropped) and the model's tfc YAML in the metadata ("yaml"). Not run by
# `make test` (Keras is not a CI dependency):
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_rnn.py
# Keras 3.15.1 with JAX on the CPU; weights are seeded normals, so the files repeat (though a
# rerun on 2026-11-30, adding the SimpleRNN cases, wrote five GRU/LSTM files with other bytes;
# those were left as committed).
import os
import zlib
import numpy as np
import keras
from keras import layers
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rnn")
IDS = np.array([[3, 1, 4, 1, 5, 0, 0], [9, 2, 6, 5, 3, 5, 8], [7, 9, 0, 0, 0, 0, 0],
                [2, 7, 1, 8, 2, 8, 0]], dtype=np.int32)  # right-padded: 2, 0, 5, 1 steps


def tfc_name(path):
    """sequential/bidirectional/forward_gru/gru_cell/kernel -> bidirectional/forward_gru/kernel:
    the model's segment and the cell's dropped"""
    parts = path.split("/")[1:]
    return "/".join(p for p in parts if not p.endswith("_cell"))


def case(name, yaml, inputs, stack, x=None):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([inputs] + stack)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    tensors = {}
    for v in model.weights:
        w = (0.5 * rng.standard_normal(v.shape)).astype(np.float32)
        v.assign(w)
        tensors[tfc_name(v.path)] = w
    shape = inputs.shape[1:]
    if x is not None:
        pass
    elif inputs.dtype == "int32":
        x = IDS[:, : shape[0]]
    else:
        x = rng.uniform(-1, 1, (4,) + tuple(shape)).astype(np.float32)
    y = np.asarray(model(x, training=False)).astype(np.float32)
    tensors["x"], tensors["y"] = x, y
    save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata={"yaml": yaml})
    print(name, sorted(k for k in tensors if k not in ("x", "y")), y.shape)


SEQ = "input: {shape: [7], dtype: int32}\nlayers:\n" \
      "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
FLT = "input: {shape: [5, 4]}\nlayers:\n"


def emb():
    return layers.Embedding(10, 3, mask_zero=True, name="embedding")


os.makedirs(OUT, exist_ok=True)
case("gru_after_sequences", FLT + "  - GRU: {units: 3, return_sequences: true}\n",
     keras.Input((5, 4)), [layers.GRU(3, return_sequences=True, name="gru")])
case("gru_before_masked", SEQ + "  - GRU: {units: 4, reset_after: false}\n",
     keras.Input((7,), dtype="int32"), [emb(), layers.GRU(4, reset_after=False, name="gru")])
case("gru_backwards_masked",
     SEQ + "  - GRU: {units: 3, go_backwards: true, return_sequences: true}\n",
     keras.Input((7,), dtype="int32"),
     [emb(), layers.GRU(3, go_backwards=True, return_sequences=True, name="gru")])
case("lstm_backwards_masked",
     SEQ + "  - LSTM: {units: 3, go_backwards: true, return_sequences: true}\n",
     keras.Input((7,), dtype="int32"),
     [emb(), layers.LSTM(3, go_backwards=True, return_sequences=True, name="lstm")])
case("lstm_backwards_last", FLT + "  - LSTM: {units: 4, go_backwards: true}\n",
     keras.Input((5, 4)), [layers.LSTM(4, go_backwards=True, name="lstm")])
case("bidir_lstm_concat_masked",
     SEQ + "  - Bidirectional: {layer: {LSTM: {units: 3, return_sequences: true}}}\n",
     keras.Input((7,), dtype="int32"),
     [emb(), layers.Bidirectional(layers.LSTM(3, return_sequences=True, name="lstm"),
                                  name="bidirectional")])
case("bidir_gru_sum_masked",
     SEQ + "  - Bidirectional: {layer: {GRU: {units: 4}}, merge_mode: sum}\n",
     keras.Input((7,), dtype="int32"),
     [emb(), layers.Bidirectional(layers.GRU(4, name="gru"), merge_mode="sum",
                                  name="bidirectional")])
case("bidir_gru_mul_sequences",
     FLT + "  - Bidirectional: {layer: {GRU: {units: 3, return_sequences: true,"
     " reset_after: false}}, merge_mode: mul}\n",
     keras.Input((5, 4)),
     [layers.Bidirectional(layers.GRU(3, return_sequences=True, reset_after=False, name="gru"),
                           merge_mode="mul", name="bidirectional")])
case("bidir_lstm_ave_masked",
     SEQ + "  - Bidirectional: {layer: {LSTM: {units: 2, return_sequences: true}},"
     " merge_mode: ave}\n",
     keras.Input((7,), dtype="int32"),
     [emb(), layers.Bidirectional(layers.LSTM(2, return_sequences=True, name="lstm"),
                                  merge_mode="ave", name="bidirectional")])


# SimpleRNN, alone and in a Bidirectional; activations other than tanh; a Masking layer
# over right-padded float steps (all-zero rows; the third sequence has no real step left
# after its first)
PADDED = np.random.default_rng(7).uniform(-1, 1, (4, 5, 4)).astype(np.float32)
PADDED[0, 3:], PADDED[2, 1:], PADDED[3, 4:] = 0, 0, 0
case("simple_after_sequences", FLT + "  - SimpleRNN: {units: 3, return_sequences: true}\n",
     keras.Input((5, 4)), [layers.SimpleRNN(3, return_sequences=True, name="simple_rnn")])
case("simple_backwards_masked",
     SEQ + "  - SimpleRNN: {units: 3, go_backwards: true, return_sequences: true}\n",
     keras.Input((7,), dtype="int32"),
     [emb(), layers.SimpleRNN(3, go_backwards=True, return_sequences=True, name="simple_rnn")])
case("simple_relu_masked", SEQ + "  - SimpleRNN: {units: 4, activation: relu}\n",
     keras.Input((7,), dtype="int32"),
     [emb(), layers.SimpleRNN(4, activation="relu", name="simple_rnn")])
case("simple_softmax_masking",
     FLT + "  - Masking: {mask_value: 0}\n"
     "  - SimpleRNN: {units: 3, activation: softmax, return_sequences: true}\n",
     keras.Input((5, 4)),
     [layers.Masking(0.0, name="masking"),
      layers.SimpleRNN(3, activation="softmax", return_sequences=True, name="simple_rnn")],
     PADDED)
case("simple_linear_nobias_backwards",
     FLT + "  - SimpleRNN: {units: 4, activation: null, use_bias: false, go_backwards: true}\n",
     keras.Input((5, 4)),
     [layers.SimpleRNN(4, activation=None, use_bias=False, go_backwards=True,
                       name="simple_rnn")])
case("bidir_simple_concat_masked",
     SEQ + "  - Bidirectional: {layer: {SimpleRNN: {units: 3, return_sequences: true}}}\n",
     keras.Input((7,), dtype="int32"),
     [emb(), layers.Bidirectional(layers.SimpleRNN(3, return_sequences=True, name="simple_rnn"),
                                  name="bidirectional")])
case("bidir_simple_elu_sum",
     FLT + "  - Bidirectional: {layer: {SimpleRNN: {units: 4, activation: elu}},"
     " merge_mode: sum}\n",
     keras.Input((5, 4)),
     [layers.Bidirectional(layers.SimpleRNN(4, activation="elu", name="simple_rnn"),
                           merge_mode="sum", name="bidirectional")])
