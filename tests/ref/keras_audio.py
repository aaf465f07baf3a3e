#!/usr/bin/env python3
# Writes the Keras parity fixtures of STFTSpectrogram and MelSpectrogram (tests/test_audio.c)
# into tests/ref/audio/, in keras_group_norm.py's format (its write_cases): per case the tfc
# YAML, the input x, Keras 3's output y, MSE targets, the input's gradient dx, each trainable
# weight's gradient and every weight under its Keras 3 path (STFTSpectrogram's real_kernel and
# imag_kernel as Keras's initializers.STFT fills them). Not run by `make test`. To regenerate
# (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_audio.py
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_group_norm import write_cases  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "audio")
L = keras.layers


def one(shape, layer, yaml_args, extra=None, extra_yaml=""):
    def make():
        x = keras.Input(shape)
        y = layer()(x)
        if extra:
            y = extra(y)
        yaml = ("input: {shape: %s}\nlayers:\n  - %s: {%s}\n" %
                (list(shape), type(layer()).__name__, yaml_args)) + extra_yaml
        return keras.Model(x, y), yaml, None
    return make


def stft(**kw):
    return lambda: L.STFTSpectrogram(name="s", **kw)


def mel(**kw):
    return lambda: L.MelSpectrogram(name="m", **kw)


def head(y):
    y = L.Conv1D(4, 3, name="conv")(y)
    y = L.GlobalAveragePooling1D(name="gap")(y)
    return L.Dense(3, name="d")(y)


HEAD = ("  - Conv1D: {name: conv, filters: 4, kernel_size: 3}\n"
        "  - GlobalAveragePooling1D: {name: gap}\n  - Dense: {name: d, units: 3}\n")

CASES = {
    # the defaults (log, hann, symmetric, density, valid) on one channel, then a small model
    "stft_log": one((40, 1), stft(frame_length=16, frame_step=8),
                    "name: s, frame_length: 16, frame_step: 8", head, HEAD),
    "stft_magnitude": one((37, 2), stft(mode="magnitude", frame_length=12, frame_step=5,
                                        fft_length=16, window="hamming", periodic=True,
                                        scaling="spectrum", padding="same"),
                          "name: s, mode: magnitude, frame_length: 12, frame_step: 5, "
                          "fft_length: 16, window: hamming, periodic: true, "
                          "scaling: spectrum, padding: same"),
    # an odd fft_length (Keras's kernels then use 2 (bins - 1)), expand_dims
    "stft_psd": one((30, 2), stft(mode="psd", frame_length=8, frame_step=4, fft_length=9,
                                  expand_dims=True),
                    "name: s, mode: psd, frame_length: 8, frame_step: 4, fft_length: 9, "
                    "expand_dims: true"),
    "stft_real": one((2, 30), stft(mode="real", frame_length=8, frame_step=3,
                                   data_format="channels_first", expand_dims=True),
                     "name: s, mode: real, frame_length: 8, frame_step: 3, "
                     "data_format: channels_first, expand_dims: true"),
    "stft_imag": one((26, 3), stft(mode="imag", frame_length=10, window=None, scaling=None,
                                   padding="same"),
                     "name: s, mode: imag, frame_length: 10, window: null, scaling: null, "
                     "padding: same"),
    "stft_stft": one((3, 28), stft(mode="stft", frame_length=8, frame_step=4, padding="same",
                                   data_format="channels_first"),
                     "name: s, mode: stft, frame_length: 8, frame_step: 4, padding: same, "
                     "data_format: channels_first"),
    "stft_angle": one((24, 1), stft(mode="angle", frame_length=8, frame_step=4,
                                    window="hamming"),
                      "name: s, mode: angle, frame_length: 8, frame_step: 4, "
                      "window: hamming"),
    "mel_db": one((200,), mel(fft_length=32, sequence_stride=16, sampling_rate=8000,
                              num_mel_bins=8, min_freq=100.0),
                  "name: m, fft_length: 32, sequence_stride: 16, sampling_rate: 8000, "
                  "num_mel_bins: 8, min_freq: 100.0"),
    "mel_power": one((150,), mel(fft_length=32, sequence_stride=10, sequence_length=24,
                                 window="hamming", sampling_rate=6000, num_mel_bins=6,
                                 max_freq=2500.0, power_to_db=False, mag_exp=1.0),
                     "name: m, fft_length: 32, sequence_stride: 10, sequence_length: 24, "
                     "window: hamming, sampling_rate: 6000, num_mel_bins: 6, "
                     "max_freq: 2500.0, power_to_db: false, mag_exp: 1.0"),
    # the top_db floor active (its gradient to the batch's maximum), ref_power, min_power
    "mel_floor": one((120,), mel(fft_length=16, sequence_stride=8, sampling_rate=4000,
                                 num_mel_bins=5, top_db=12.0, ref_power=2.0, min_power=1e-3,
                                 window=None),
                     "name: m, fft_length: 16, sequence_stride: 8, sampling_rate: 4000, "
                     "num_mel_bins: 5, top_db: 12.0, ref_power: 2.0, min_power: 0.001, "
                     "window: null",
                     lambda y: L.Dense(2, name="d")(L.Flatten(name="f")(y)),
                     "  - Flatten: {name: f}\n  - Dense: {name: d, units: 2}\n"),
}


def draw(rng, model, arg):
    """Keras's own weights (the STFT kernels as its initializer fills them; Conv1D and Dense
    glorot), a normal input batch."""
    shape = (3,) + tuple(model.input_shape[1:])
    return rng.normal(size=shape).astype("float32")


if __name__ == "__main__":
    keras.utils.set_random_seed(5)
    write_cases(CASES, OUT, 43, draw)
