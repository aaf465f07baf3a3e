#!/usr/bin/env python3
"""Keras 3 models saved as a Keras user saves them, for tfc-import's tests.

Each case builds a small model in Python with Keras's own API (not from a tfc YAML), gives it
seeded, non-trivial weights (biases, gammas and betas, PReLU's slopes perturbed away from
their constant initial values; BatchNormalization's moving mean and variance away from 0 and
1; Normalization adapted), and writes into tests/ref/import/:
  CASE.keras               model.save(): a zip of config.json, metadata.json, model.weights.h5
  CASE.x.npy               a few input examples (float32, or int32 token ids, right-padded)
  CASE.y.npy               Keras's model.predict on them (float32)
  CASE.expect.safetensors  every Keras variable under tfc's weight name (docs/SPEC.md §5),
                           as float32 (Normalization's integer `count` too, as tfc writes it)
and for the first case also CASE.weights.h5 (model.save_weights) and CASE.h5 (the legacy
HDF5 model.save), and a CASE.h5 of `recurrent` too (a StackedRNNCells' weights there:
rnn/stacked_rnn_cells/lstm_cell/kernel). Each model is compiled (LOSSES: the archive's compile_config); the first is
also trained one step, so its archive holds Adam's variables besides the model's.

tfc's names are Keras 3's variable paths from the top-level layer on (a Sequential's carry
the model's name in front: sequential/dense/kernel is dense/kernel; layer_paths) with a
recurrent cell's own segment dropped (keras_from_yaml.tfc_name:
bidirectional/forward_lstm/kernel), and in a StackedRNNCells the stack's segment dropped and
each cell named by its type's snake case numbered within the stack (rnn/lstm_cell/kernel,
rnn/gru_cell/kernel; stack_names).

Checked here, for every case: a fresh model of the same code (other weights) that takes the
expected tensors by tfc's names, each tensor used once (load_expected), predicts the saved
outputs exactly, and so does keras.saving.load_model of the saved archive.

Not run by `make test` (Keras is not a CI dependency). To regenerate (Keras 3.15.1, JAX, CPU):
  KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_import.py
or only the cases named (`... keras_import.py nested nested_seq`). The .npy and .safetensors
files are the same at every run. The .keras archives and the .h5
files are not, byte for byte: metadata.json's date_saved, model.weights.h5's zip timestamp
and HDF5's own, and config.json's "shared_object_id"s (Python object ids, of initializers)
change; config.json is otherwise the same, and so are the weights.
"""
import os
import sys
import warnings

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np
from safetensors.numpy import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from keras_from_yaml import snake_case, tfc_name  # noqa: E402

OUT = os.path.join(HERE, "import")
L = keras.layers
N = 4  # examples per case


def normal(rng, *shape):
    return rng.normal(size=shape).astype(np.float32)


# ---- the cases: each builds its model from `rng` (Normalization's adapt data among it) and
# ---- returns (model, x) -------------------------------------------------------------------

def mlp(rng):
    model = keras.Sequential([
        keras.Input((8,)),
        L.Dense(16, activation="relu"),
        L.BatchNormalization(),
        L.Dropout(0.2),
        L.Dense(3, activation="softmax"),
    ])
    return model, normal(rng, N, 8)


def cnn(rng):
    model = keras.Sequential([
        keras.Input((12, 12, 1)),
        L.Conv2D(4, 3, activation="relu"),                 # 10x10x4
        L.MaxPooling2D(),                                   # 5x5x4
        L.SeparableConv2D(6, 3, padding="same", depth_multiplier=2),
        L.DepthwiseConv2D(3, depth_multiplier=2),           # 3x3x12
        L.Conv2DTranspose(4, 3, strides=2),                 # 7x7x4
        L.BatchNormalization(),
        L.GlobalAveragePooling2D(),
        L.Dense(3),
    ])
    return model, normal(rng, N, 12, 12, 1)


def resnet(rng):
    x = keras.Input((6, 6, 3))
    a = L.Conv2D(4, 3, padding="same")(x)
    a = L.ReLU()(a)
    a = L.Conv2D(4, 3, padding="same")(a)
    b = L.Conv2D(4, 1)(x)
    h = L.Add()([a, b])
    h = L.Concatenate()([h, x])                             # 6x6x7
    h = L.Activation("relu")(h)
    h = L.LayerNormalization()(h)
    h = L.Flatten()(h)
    y = L.Dense(3)(h)
    return keras.Model(x, y), normal(rng, N, 6, 6, 3)


def text(rng):
    x = keras.Input((10,), dtype="int32")
    h = L.Embedding(50, 8, mask_zero=True)(x)
    h = L.Bidirectional(L.LSTM(6, return_sequences=True))(h)
    h = L.GRU(5)(h)
    y = L.Dense(2)(h)
    ids = rng.integers(1, 50, size=(N, 10)).astype(np.int32)
    for i, length in enumerate((10, 7, 3, 5)):               # right-padded with 0
        ids[i, length:] = 0
    return keras.Model(x, y), ids


def transformer(rng):
    x = keras.Input((6, 8))
    a = L.MultiHeadAttention(2, 4)(x, x)
    h = L.Add()([x, a])
    h = L.LayerNormalization()(h)
    h = L.Dense(8, activation="relu")(h)
    h = L.GlobalAveragePooling1D()(h)
    y = L.Dense(2)(h)
    return keras.Model(x, y), normal(rng, N, 6, 8)


def recurrent(rng):
    x = keras.Input((5, 4))
    h = L.RNN(L.StackedRNNCells([L.LSTMCell(3), L.GRUCell(3)]), return_sequences=True)(x)
    h = L.TimeDistributed(L.Dense(2))(h)
    h = L.SimpleRNN(3)(h)
    y = L.Dense(1)(h)
    return keras.Model(x, y), normal(rng, N, 5, 4)


def misc(rng):
    """The 1-D convolutions, the normalizations and the layers with weights not above."""
    norm = L.Normalization()
    norm.adapt(rng.normal(2.0, 3.0, size=(64, 6, 3)).astype(np.float32))
    model = keras.Sequential([
        keras.Input((6, 3)),
        norm,
        L.Conv1D(4, 3, padding="same"),
        L.PReLU(shared_axes=[1]),
        L.SpectralNormalization(L.Dense(4)),
        L.GroupNormalization(groups=2),
        L.EinsumDense("abc,cd->abd", output_shape=(None, 5), bias_axes="d"),
        L.RMSNormalization(),
        L.SeparableConv1D(4, 3, padding="same"),
        L.DepthwiseConv1D(3),                               # 4 steps
        L.Conv1DTranspose(3, 2, strides=2),                 # 8 steps
        L.GlobalMaxPooling1D(),
        L.Dense(2),
    ])
    return model, rng.normal(2.0, 3.0, size=(N, 6, 3)).astype(np.float32)


def volume(rng):
    """A ConvLSTM2D over frames, then its output as a volume for Conv3D."""
    model = keras.Sequential([
        keras.Input((3, 6, 6, 1)),
        L.ConvLSTM2D(2, 3, padding="same", return_sequences=True),  # 3x6x6x2
        L.Conv3D(3, 2),                                     # 2x5x5x3
        L.Conv3DTranspose(2, 2, strides=2),                 # 4x10x10x2
        L.MaxPooling3D(2),
        L.GlobalAveragePooling3D(),
        L.Dense(2),
    ])
    return model, normal(rng, N, 3, 6, 6, 1)


def attention(rng):
    """The attention layers besides MultiHeadAttention, with their optional weights."""
    x = keras.Input((5, 8))
    q = L.GroupQueryAttention(head_dim=4, num_query_heads=2, num_key_value_heads=1)(x, x)
    a = L.Attention(use_scale=True, score_mode="concat")([q, x])
    b = L.AdditiveAttention(use_scale=True)([a, x])
    h = L.GlobalAveragePooling1D()(b)
    y = L.Dense(2)(h)
    return keras.Model(x, y), normal(rng, N, 5, 8)


def nested(rng):
    """keras.io's transfer learning: a frozen functional base called with training=False
    (which Keras 3's fit overrides with its own) inside a functional model; inside the base,
    a functional block of its own, and a layer reading the base's input past the block."""
    bi = keras.Input((6, 6, 3))
    b = L.Conv2D(4, 3, padding="same", use_bias=False)(bi)
    b = L.BatchNormalization()(b)
    b = L.ReLU()(b)
    block = keras.Model(bi, b, name="block")
    ci = keras.Input((6, 6, 3))
    c = block(ci)
    s = L.Conv2D(4, 1)(ci)
    c = L.Add()([c, s])
    base = keras.Model(ci, c, name="base")
    base.trainable = False
    x = keras.Input((6, 6, 3))
    h = L.Rescaling(1 / 127.5, offset=-1)(x)
    h = base(h, training=False)
    h = L.GlobalAveragePooling2D()(h)
    h = L.Dropout(0.2)(h)
    y = L.Dense(2)(h)
    return keras.Model(x, y), rng.uniform(0, 255, size=(N, 6, 6, 3)).astype(np.float32)


def nested_seq(rng):
    """A functional model of two branches as a Sequential's layer."""
    bi = keras.Input((5,))
    a = L.Dense(4, activation="relu")(bi)
    b = L.Dense(4)(bi)
    o = L.Add()([a, b])
    base = keras.Model(bi, o)
    model = keras.Sequential([keras.Input((5,)), base, L.BatchNormalization(), L.Dense(2)])
    return model, normal(rng, N, 5)


CASES = [mlp, cnn, resnet, text, transformer, recurrent, misc, volume, attention, nested,
         nested_seq]
# What each model is compiled with, as its user would (the archive's compile_config).
LOSSES = {
    "mlp": lambda: dict(optimizer="adam", loss="sparse_categorical_crossentropy",
                        metrics=["accuracy"]),
    "cnn": lambda: dict(optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
                        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)),
    "text": lambda: dict(optimizer="rmsprop",
                         loss=keras.losses.BinaryCrossentropy(from_logits=True)),
}


# ---- names ---------------------------------------------------------------------------------

def layer_paths(model):
    """{variable path: the path from its top-level layer's name}: a Sequential's variables
    are created under the model's name scope (sequential/dense/kernel), a functional model's
    are not (dense/kernel); tfc's start at the layer (SPEC §5)."""
    rel = {}
    for layer in model.layers:
        for v in layer.weights:
            parts = v.path.split("/")
            # a functional model inside: its layers were built outside any scope of its own
            # (conv2d/kernel), and tfc writes them in place among the model's
            nested = isinstance(layer, keras.Model) and not isinstance(layer, keras.Sequential)
            rel[v.path] = v.path if nested else "/".join(parts[parts.index(layer.name):])
    return rel


def stack_names(model, rel):
    """{variable path: tfc name} of the variables of every StackedRNNCells: the stack's
    segment dropped, each cell named by its type's snake case numbered within the stack."""
    names = {}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if not isinstance(layer, L.StackedRNNCells):
            continue
        seen = {}
        for cell in layer.cells:
            base = snake_case(type(cell).__name__)
            k = seen.get(base, 0)
            seen[base] = k + 1
            cell_name = base if k == 0 else "%s_%d" % (base, k)
            for v in cell.weights:
                parts = rel[v.path].split("/")
                i = parts.index(layer.name)
                assert i > 0 and parts[i + 1] == cell.name, v.path
                names[v.path] = "/".join([tfc_name("/".join(parts[:i])), cell_name,
                                          *parts[i + 2:]])
    return names


def tfc_names(model):
    """[(variable, tfc name)] of every variable of the model, each name once."""
    rel = layer_paths(model)
    assert set(rel) == {v.path for v in model.weights}
    stacked = stack_names(model, rel)
    out = [(v, stacked.get(v.path) or tfc_name(rel[v.path])) for v in model.weights]
    names = [n for _, n in out]
    assert len(set(names)) == len(names), "two variables share a tfc name: %s" % names
    return out


def load_expected(model, tensors):
    """Assigns every variable from `tensors` by tfc's name, each tensor used exactly once."""
    used = set()
    for v, name in tfc_names(model):
        assert name in tensors, "%s (Keras %s) not in the expected file" % (name, v.path)
        t = tensors[name]
        assert tuple(t.shape) == tuple(v.shape), (name, t.shape, v.shape)
        v.assign(t.astype(v.dtype))
        used.add(name)
    assert used == set(tensors), "unused: %s" % sorted(set(tensors) - used)
    for layer in model.layers:  # Normalization's mean and variance, as Keras's load does
        if hasattr(layer, "finalize_state"):
            layer.finalize_state()


# ---- weights -------------------------------------------------------------------------------

def perturb(model, rng):
    """Moves the constant-initialized weights (zeros, ones) off their constants, and
    BatchNormalization's moving statistics off 0 and 1; Normalization's stay adapted."""
    adapted = {id(v) for layer in model._flatten_layers(include_self=False, recursive=True)
               if isinstance(layer, L.Normalization) for v in layer.weights}
    for v in model.weights:
        if id(v) in adapted:
            continue
        a = np.asarray(v.numpy())
        leaf = v.path.split("/")[-1]
        if leaf == "moving_variance":
            a = rng.uniform(0.5, 2.0, size=a.shape)
        elif leaf == "moving_mean":
            a = rng.normal(0.0, 0.5, size=a.shape)
        elif a.ndim <= 1 or leaf in ("bias", "alpha") or np.all(a == a.flat[0]):
            a = a + rng.normal(0.0, 0.2, size=a.shape)
        else:
            continue
        v.assign(a.astype(np.float32))


def expected(model):
    return {name: np.array(v.numpy(), dtype=np.float32, order="C")
            for v, name in tfc_names(model)}


# ---- main ----------------------------------------------------------------------------------

def build(case, seed):
    keras.utils.clear_session()  # default names (dense, dense_1, lstm_cell) from the start
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    model, x = case(rng)
    return model, x, rng


LEGACY_H5 = ("mlp", "recurrent")  # the cases also saved as a legacy .h5


def main():
    os.makedirs(OUT, exist_ok=True)
    only = sys.argv[1:]  # case names: write those alone (each keeps its seed)
    for k, case in enumerate(CASES):
        name = case.__name__
        if only and name not in only:
            continue
        path = os.path.join(OUT, name)
        model, x, rng = build(case, 1000 + k)
        perturb(model, rng)
        model.compile(**LOSSES.get(name, lambda: dict(optimizer="adam", loss="mse"))())
        if k == 0:  # trained a step, as models are: the archive holds the optimizer's state
            model.fit(normal(rng, 8, 8), rng.integers(0, 3, size=8), batch_size=8, epochs=1,
                      shuffle=False, verbose=0)
        y = np.asarray(model.predict(x, verbose=0), dtype=np.float32)
        assert np.all(np.isfinite(y)) and np.std(y) > 1e-3, name
        weights = expected(model)
        model.save(path + ".keras")
        np.save(path + ".x.npy", x)
        np.save(path + ".y.npy", y)
        save_file(weights, path + ".expect.safetensors",
                  # one key: safetensors writes a map's keys in no fixed order
                  metadata={"source": "%s.keras, Keras %s" % (name, keras.__version__)})
        if k == 0:
            model.save_weights(path + ".weights.h5")
        if name in LEGACY_H5:
            with warnings.catch_warnings():  # "This file format is considered legacy"
                warnings.simplefilter("ignore")
                model.save(path + ".h5")

        # a fresh model with other weights takes the expected ones by name ...
        fresh, _, _ = build(case, 2000 + k)
        load_expected(fresh, load_file(path + ".expect.safetensors"))
        y2 = np.asarray(fresh.predict(x, verbose=0), dtype=np.float32)
        # ... and Keras reads its own archive back
        keras.utils.clear_session()
        with warnings.catch_warnings():  # compiled, never trained: an unbuilt optimizer
            warnings.filterwarnings("ignore", "Skipping variable loading for optimizer")
            loaded = keras.saving.load_model(path + ".keras")
        y3 = np.asarray(loaded.predict(x, verbose=0), dtype=np.float32)
        d2, d3 = float(np.max(np.abs(y2 - y))), float(np.max(np.abs(y3 - y)))
        assert d2 == 0 and d3 == 0, (name, d2, d3)
        sizes = ", ".join("%s %d" % (ext, os.path.getsize(path + ext))
                          for ext in (".keras", ".x.npy", ".y.npy", ".expect.safetensors"))
        print("%-12s %2d tensors; %s bytes" % (name, len(weights), sizes))


if __name__ == "__main__":
    main()
