#!/usr/bin/env python3
# Writes the Keras parity fixtures of ConvLSTM2D, ConvLSTM1D and ConvLSTM3D (tests/test_conv_lstm.c) into
# tests/ref/conv_lstm/, in keras_group_norm.py's format (the tfc YAML in the metadata "yaml"; x, Keras 3's output y,
# MSE targets t, the MSE loss's gradients "dx" and "grad:<path>", every weight), the weights
# under tfc's paths: Keras's with the cell's segment dropped (cl/conv_lstm2d_cell/kernel ->
# cl/kernel). Not run by `make test` (Keras is not a CI dependency). To regenerate (Keras
# 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_conv_lstm.py
import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv_lstm")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
L = keras.layers
BATCH = 3


def tfc_path(path):
    return "/".join(p for p in path.split("/") if not p.endswith("_cell"))


def model_of(shape, layers):
    """A Sequential of (type, args) pairs and its tfc YAML"""
    x = keras.Input(shape)
    h = x
    for t, args in layers:
        h = getattr(L, t)(**args)(h)

    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(e) for e in v) + "]"
        return str(v)

    yaml = "input: {shape: %s}\nlayers:\n" % value(list(shape))
    for t, args in layers:
        yaml += "  - %s: {%s}\n" % (t, ", ".join("%s: %s" % (k, value(v))
                                                for k, v in args.items()))
    return keras.Model(x, h), yaml


CASES = {
    # every step's state, same padding (the input convolution's too)
    "seq_same": ((4, 5, 5, 2), [("ConvLSTM2D", dict(name="cl", filters=3, kernel_size=3,
                                                     padding="same",
                                                     return_sequences=True))]),
    # the last state, valid padding, a 3x2 kernel; a Dense after it
    "last_valid": ((4, 6, 5, 2), [("ConvLSTM2D", dict(name="cl", filters=3, kernel_size=[3, 2])),
                                  ("Flatten", dict(name="fl")),
                                  ("Dense", dict(name="d", units=4))]),
    # strides 2, valid, every step
    "stride2_valid": ((3, 7, 8, 2), [("ConvLSTM2D", dict(name="cl", filters=2, kernel_size=3,
                                                         strides=2, return_sequences=True))]),
    # go_backwards (outputs in the reversed order), an even kernel with same padding (the
    # extra row after), no bias
    "backwards": ((4, 5, 4, 3), [("ConvLSTM2D", dict(name="cl", filters=2, kernel_size=2,
                                                     padding="same", go_backwards=True,
                                                     use_bias=False,
                                                     return_sequences=True))]),
    # go_backwards, the last state; dilation 2
    "backwards_last_dilated": ((3, 7, 7, 2), [("ConvLSTM2D", dict(name="cl", filters=3,
                                                                  kernel_size=3,
                                                                  dilation_rate=2,
                                                                  go_backwards=True))]),
    # ConvLSTM1D: every step, same padding; the last state going backwards with strides 2
    "conv1d_seq_same": ((4, 7, 2), [("ConvLSTM1D", dict(name="cl", filters=3, kernel_size=3,
                                                        padding="same",
                                                        return_sequences=True))]),
    "conv1d_last_stride_backwards": ((4, 9, 2), [("ConvLSTM1D", dict(name="cl", filters=2,
                                                                     kernel_size=2, strides=2,
                                                                     go_backwards=True))]),
    # ConvLSTM3D: every step, same padding, a 2x3x1 kernel (an even depth: the extra plane
    # after); every window argument differs along its three axes, so that a swap shows
    "conv3d_seq_same": ((3, 3, 4, 3, 2), [("ConvLSTM3D", dict(name="cl", filters=2,
                                                              kernel_size=[2, 3, 1],
                                                              padding="same",
                                                              return_sequences=True))]),
    # the last state going backwards, strides (2, 1, 1), valid; a Dense after it
    "conv3d_last_stride_backwards": ((3, 5, 3, 4, 2), [("ConvLSTM3D", dict(name="cl", filters=2,
                                                                           kernel_size=[2, 2, 3],
                                                                           strides=[2, 1, 1],
                                                                           go_backwards=True)),
                                                       ("Flatten", dict(name="fl")),
                                                       ("Dense", dict(name="d", units=3))]),
    # dilation (2, 1, 1), valid, no bias, every step
    "conv3d_dilated_nobias": ((3, 5, 4, 3, 1), [("ConvLSTM3D", dict(name="cl", filters=2,
                                                                    kernel_size=[2, 3, 2],
                                                                    dilation_rate=[2, 1, 1],
                                                                    use_bias=False,
                                                                    return_sequences=True))]),
    # keras.io's next-frame example: activation relu (derivatives from the kept
    # pre-activations), every step
    "relu": ((3, 5, 5, 2), [("ConvLSTM2D", dict(name="cl", filters=3, kernel_size=3,
                                                padding="same", activation="relu",
                                                return_sequences=True))]),
    # activations whose derivatives need their inputs, gates hard_sigmoid (Keras 2's default)
    "conv1d_gelu_hard_sigmoid": ((4, 6, 2), [("ConvLSTM1D", dict(name="cl", filters=2,
                                                                 kernel_size=3,
                                                                 activation="gelu",
                                                                 recurrent_activation=
                                                                 "hard_sigmoid"))]),
    # dropout and recurrent_dropout, trained with the masks tfc draws (hand_masks)
    "dropout_recurrent": ((4, 5, 5, 2), [("ConvLSTM2D", dict(name="cl", filters=3,
                                                              kernel_size=3, padding="same",
                                                              dropout=0.25,
                                                              recurrent_dropout=0.4,
                                                              return_sequences=True))]),
    "conv1d_recurrent_backwards": ((5, 6, 2), [("ConvLSTM1D", dict(name="cl", filters=2,
                                                                    kernel_size=3,
                                                                    recurrent_dropout=0.3,
                                                                    go_backwards=True,
                                                                    activation="relu",
                                                                    return_sequences=True))]),
    "conv3d_recurrent_last": ((3, 3, 4, 3, 2), [("ConvLSTM3D", dict(name="cl", filters=2,
                                                                     kernel_size=[2, 3, 1],
                                                                     padding="same",
                                                                     dropout=0.2,
                                                                     recurrent_dropout=0.5)),
                                                 ("Flatten", dict(name="fl")),
                                                 ("Dense", dict(name="d", units=3))]),
}


def mask(key, shape, rate):
    """dropout_forward's mask of a tensor of `shape` at (key, step 0), float32 as tfc's"""
    from keras_recurrent_dropout import keep
    return jnp.asarray(keep(key, shape[0], int(np.prod(shape[1:])), rate).reshape(shape))


def hand_masks(layer, index, step_shape, state_shape):
    """Gives the layer's cell the masks tfc's training pass draws for a batch of BATCH (layer
    `index` of the model, the harness's seed 1 at step 0): gate k's input mask from the
    layer's key's stream k + 1, its state mask from stream k + 5 (conv_lstm2d.c)"""
    from keras_recurrent_dropout import rng_key
    cell = layer.cell
    key = rng_key(1, 0x100000 + index)
    inp = [mask(rng_key(key, k + 1), (BATCH,) + step_shape, cell.dropout) for k in range(4)]
    rec = [mask(rng_key(key, k + 5), (BATCH,) + state_shape, cell.recurrent_dropout)
           for k in range(4)]
    cell.get_dropout_mask = lambda x: inp if cell.dropout else None
    cell.get_recurrent_dropout_mask = lambda h: rec if cell.recurrent_dropout else None


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(43)
    for name, (shape, layers) in CASES.items():
        model, yaml = model_of(shape, layers)
        for v in model.weights:
            v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
        x = rng.normal(size=(BATCH,) + shape).astype("float32")
        y = np.asarray(model(x, training=False))
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = {"x": x, "y": y, "t": t}
        for v in model.weights:
            tensors[tfc_path(v.path)] = np.asarray(v.value)
        for i, layer in enumerate(model.layers[1:]):
            if getattr(layer, "recurrent_dropout", 0) or getattr(layer, "dropout", 0):
                hand_masks(layer, i, shape[1:], tuple(layer.output.shape[-layer.cell.rank - 1:]))
        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]

        def loss(tv, xin):
            pred, _ = model.stateless_call(tv, ntv, xin, training=True)
            return jnp.mean(jnp.mean(jnp.square(pred - t), axis=-1))

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
