#!/usr/bin/env python3
# Writes the Keras parity fixtures of TimeDistributed (tests/test_time_distributed.c) into
# tests/ref/time_distributed/, in keras_group_norm.py's format: one safetensors file per case
# holding its tfc YAML (metadata "yaml"), the input x, Keras 3's inference output y, MSE
# targets t, the gradients of Keras's MSE loss (training mode) with respect to x ("dx", float
# inputs) and each weight ("grad:<path>"), the non-trainable weights after that training
# forward ("moved:<path>": BatchNormalization's moving statistics, updated once per step), and
# every weight under its Keras 3 variable path. Not run by `make test` (Keras is not a CI
# dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_time_distributed.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "time_distributed")
L = keras.layers


def video():
    """Frames (T, H, W, C): TimeDistributed Conv2D, MaxPooling2D, Flatten, then an LSTM and a
    Dense."""
    x = keras.Input((4, 7, 6, 2))
    h = L.TimeDistributed(L.Conv2D(5, 3, activation="relu"), name="td_conv")(x)
    h = L.TimeDistributed(L.MaxPooling2D(2), name="td_pool")(h)
    h = L.TimeDistributed(L.Flatten(), name="td_flat")(h)
    h = L.LSTM(6, name="lstm")(h)
    y = L.Dense(3, name="out")(h)
    yaml = ("input: {shape: [4, 7, 6, 2]}\nlayers:\n"
            "  - TimeDistributed: {name: td_conv, layer: {Conv2D: {filters: 5, kernel_size: 3,"
            " activation: relu}}}\n"
            "  - TimeDistributed: {name: td_pool, layer: {MaxPooling2D: {pool_size: 2}}}\n"
            "  - TimeDistributed: {name: td_flat, layer: {Flatten: {}}}\n"
            "  - LSTM: {name: lstm, units: 6}\n"
            "  - Dense: {name: out, units: 3}\n")
    return keras.Model(x, y), yaml, 0.0


def masked():
    """Token ids with padding 0 (Embedding mask_zero): TimeDistributed Dense (its inner layer
    named), whose output keeps the mask for the LSTM after it."""
    x = keras.Input((6,), dtype="int32")
    h = L.Embedding(9, 5, mask_zero=True, name="emb")(x)
    h = L.TimeDistributed(L.Dense(4, activation="tanh", name="proj"), name="td")(h)
    h = L.LSTM(5, name="lstm")(h)
    y = L.Dense(3, name="out")(h)
    yaml = ("input: {shape: [6], dtype: int32}\nlayers:\n"
            "  - Embedding: {name: emb, input_dim: 9, output_dim: 5, mask_zero: true}\n"
            "  - TimeDistributed: {name: td, layer: {Dense: {name: proj, units: 4, "
            "activation: tanh}}}\n"
            "  - LSTM: {name: lstm, units: 5}\n"
            "  - Dense: {name: out, units: 3}\n")
    return keras.Model(x, y), yaml, 0.0


def batchnorm():
    """TimeDistributed BatchNormalization on (T, H, W, C) between convolutions: in training
    each step's batch statistics (Keras calls the layer step by step)."""
    x = keras.Input((3, 5, 5, 2))
    h = L.TimeDistributed(L.Conv2D(4, 3, use_bias=False), name="td_conv")(x)
    h = L.TimeDistributed(L.BatchNormalization(momentum=0.9), name="td_bn")(h)
    h = L.TimeDistributed(L.ReLU(), name="td_relu")(h)
    y = L.TimeDistributed(L.GlobalAveragePooling2D(), name="td_gap")(h)
    yaml = ("input: {shape: [3, 5, 5, 2]}\nlayers:\n"
            "  - TimeDistributed: {name: td_conv, layer: {Conv2D: {filters: 4, kernel_size: 3,"
            " use_bias: false}}}\n"
            "  - TimeDistributed: {name: td_bn, layer: {BatchNormalization: {momentum: 0.9}}}\n"
            "  - TimeDistributed: {name: td_relu, layer: {ReLU: {}}}\n"
            "  - TimeDistributed: {name: td_gap, layer: {GlobalAveragePooling2D: {}}}\n")
    return keras.Model(x, y), yaml, 1.0


def sequence():
    """Sequences of sequences (T, S, C): Conv1D, LayerNormalization, GlobalMaxPooling1D, then
    Dense (the default names: time_distributed/dense)."""
    x = keras.Input((3, 8, 3))
    h = L.TimeDistributed(L.Conv1D(4, 3, padding="same", activation="gelu"), name="td_c")(x)
    h = L.TimeDistributed(L.LayerNormalization(), name="td_ln")(h)
    h = L.TimeDistributed(L.GlobalMaxPooling1D(), name="td_gmp")(h)
    y = L.TimeDistributed(L.Dense(2))(h)
    yaml = ("input: {shape: [3, 8, 3]}\nlayers:\n"
            "  - TimeDistributed: {name: td_c, layer: {Conv1D: {filters: 4, kernel_size: 3, "
            "padding: same, activation: gelu}}}\n"
            "  - TimeDistributed: {name: td_ln, layer: {LayerNormalization: {}}}\n"
            "  - TimeDistributed: {name: td_gmp, layer: {GlobalMaxPooling1D: {}}}\n"
            "  - TimeDistributed: {layer: {Dense: {units: 2}}}\n")
    return keras.Model(x, y), yaml, 0.0


def volume():
    """Volumes per step (T, D, H, W, C): the 3-D convolutions, poolings, padding and
    upsampling."""
    x = keras.Input((3, 3, 4, 4, 2))
    h = L.TimeDistributed(L.Conv3D(3, 2, activation="relu"), name="td_c3")(x)
    h = L.TimeDistributed(L.Conv3DTranspose(2, 2), name="td_c3t")(h)
    h = L.TimeDistributed(L.AveragePooling3D(2), name="td_ap3")(h)
    h = L.TimeDistributed(L.UpSampling3D(2), name="td_up3")(h)
    h = L.TimeDistributed(L.ZeroPadding3D(1), name="td_zp3")(h)
    h = L.TimeDistributed(L.AdaptiveMaxPooling3D((2, 2, 2)), name="td_amp3")(h)
    y = L.TimeDistributed(L.GlobalMaxPooling3D(), name="td_gmp3")(h)
    yaml = ("input: {shape: [3, 3, 4, 4, 2]}\nlayers:\n"
            "  - TimeDistributed: {name: td_c3, layer: {Conv3D: {filters: 3, kernel_size: 2,"
            " activation: relu}}}\n"
            "  - TimeDistributed: {name: td_c3t, layer: {Conv3DTranspose: {filters: 2, "
            "kernel_size: 2}}}\n"
            "  - TimeDistributed: {name: td_ap3, layer: {AveragePooling3D: {pool_size: 2}}}\n"
            "  - TimeDistributed: {name: td_up3, layer: {UpSampling3D: {size: 2}}}\n"
            "  - TimeDistributed: {name: td_zp3, layer: {ZeroPadding3D: {padding: 1}}}\n"
            "  - TimeDistributed: {name: td_amp3, layer: {AdaptiveMaxPooling3D: "
            "{output_size: [2, 2, 2]}}}\n"
            "  - TimeDistributed: {name: td_gmp3, layer: {GlobalMaxPooling3D: {}}}\n")
    return keras.Model(x, y), yaml, 0.0


def assorted():
    """Sequences per step (T, S, C): EinsumDense, the other 1-D convolutions,
    UnitNormalization, an adaptive pooling, Permute, RepeatVector and Identity (the default
    inner names: einsum_dense, separable_conv1d, ...)."""
    x = keras.Input((3, 6, 4))
    h = L.TimeDistributed(L.EinsumDense("abc,cd->abd", (6, 5), bias_axes="d"))(x)
    h = L.TimeDistributed(L.SeparableConv1D(4, 3, padding="same"))(h)
    h = L.TimeDistributed(L.DepthwiseConv1D(3))(h)
    h = L.TimeDistributed(L.Conv1DTranspose(3, 2, strides=2))(h)
    h = L.TimeDistributed(L.UnitNormalization())(h)
    h = L.TimeDistributed(L.AdaptiveAveragePooling1D(4))(h)
    h = L.TimeDistributed(L.Permute((2, 1)))(h)
    h = L.TimeDistributed(L.Flatten())(h)
    h = L.TimeDistributed(L.RepeatVector(2))(h)
    h = L.TimeDistributed(L.Identity())(h)
    y = L.TimeDistributed(L.Dense(2))(h)
    yaml = ("input: {shape: [3, 6, 4]}\nlayers:\n"
            "  - TimeDistributed: {layer: {EinsumDense: {equation: 'abc,cd->abd', "
            "output_shape: [6, 5], bias_axes: d}}}\n"
            "  - TimeDistributed: {layer: {SeparableConv1D: {filters: 4, kernel_size: 3, "
            "padding: same}}}\n"
            "  - TimeDistributed: {layer: {DepthwiseConv1D: {kernel_size: 3}}}\n"
            "  - TimeDistributed: {layer: {Conv1DTranspose: {filters: 3, kernel_size: 2, "
            "strides: 2}}}\n"
            "  - TimeDistributed: {layer: {UnitNormalization: {}}}\n"
            "  - TimeDistributed: {layer: {AdaptiveAveragePooling1D: {output_size: 4}}}\n"
            "  - TimeDistributed: {layer: {Permute: {dims: [2, 1]}}}\n"
            "  - TimeDistributed: {layer: {Flatten: {}}}\n"
            "  - TimeDistributed: {layer: {RepeatVector: {n: 2}}}\n"
            "  - TimeDistributed: {layer: {Identity: {}}}\n"
            "  - TimeDistributed: {layer: {Dense: {units: 2}}}\n")
    return keras.Model(x, y), yaml, 0.0


def frames():
    """Images per step (T, H, W, C) resized and cropped (Keras applies both at inference
    too)."""
    x = keras.Input((2, 6, 5, 2))
    h = L.TimeDistributed(L.Resizing(4, 4), name="td_rs")(x)
    h = L.TimeDistributed(L.CenterCrop(3, 3), name="td_cc")(h)
    h = L.TimeDistributed(L.Conv2D(2, 2), name="td_c")(h)
    y = L.TimeDistributed(L.Flatten(), name="td_f")(h)
    yaml = ("input: {shape: [2, 6, 5, 2]}\nlayers:\n"
            "  - TimeDistributed: {name: td_rs, layer: {Resizing: {height: 4, width: 4}}}\n"
            "  - TimeDistributed: {name: td_cc, layer: {CenterCrop: {height: 3, width: 3}}}\n"
            "  - TimeDistributed: {name: td_c, layer: {Conv2D: {filters: 2, kernel_size: 2}}}\n"
            "  - TimeDistributed: {name: td_f, layer: {Flatten: {}}}\n")
    return keras.Model(x, y), yaml, 0.0


CASES = {"video": video, "masked": masked, "batchnorm": batchnorm, "sequence": sequence,
         "volume": volume, "assorted": assorted, "frames": frames}
BATCH = 3


def path(v):
    """lstm/lstm_cell/kernel -> lstm/kernel: tfc's paths drop the cell's segment"""
    return "/".join(p for p in v.path.split("/") if not p.endswith("_cell"))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(43)
    for name, make in CASES.items():
        keras.backend.clear_session()  # Keras's default names from _1 again
        model, yaml, offset = make()
        for v in model.weights:  # weights away from Keras's ones and zeros
            if "moving_variance" in v.path or "gamma" in v.path:
                v.assign(rng.uniform(0.5, 1.5, v.shape).astype("float32"))
            else:
                v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
        shape = (BATCH,) + tuple(model.input_shape[1:])
        if model.inputs[0].dtype == "int32":
            x = rng.integers(1, 9, size=shape).astype("int32")
            for b, n in enumerate([6, 4, 2]):  # right padding
                x[b, n:] = 0
        else:
            x = (rng.normal(size=shape) + offset).astype("float32")
        y = np.asarray(model(x, training=False))
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = {"x": x, "y": y, "t": t}
        for v in model.weights:
            tensors[path(v)] = np.asarray(v.value)
        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]

        def loss(tv, xin):
            out, moved = model.stateless_call(tv, ntv, xin, training=True)
            return jnp.mean(jnp.mean(jnp.square(out - t), axis=-1)), moved

        if x.dtype == np.int32:
            gw, moved = jax.grad(loss, argnums=0, has_aux=True)(tv, jnp.asarray(x))
        else:
            (gw, gx), moved = jax.grad(loss, argnums=(0, 1), has_aux=True)(tv, jnp.asarray(x))
            tensors["dx"] = np.asarray(gx)
        for v, g in zip(model.trainable_variables, gw):
            tensors["grad:" + path(v)] = np.asarray(g)
        for v, m in zip(model.non_trainable_variables, moved):
            if "moving_" in v.path:
                tensors["moved:" + path(v)] = np.asarray(m)
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
        print(name, json.dumps({k: list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    main()
