#!/usr/bin/env python3
# Builds the Keras 3 model of a tfc model YAML and loads a tfc safetensors file into it by
# name: the reverse of the other tests/ref scripts (SPEC §5: "a Keras model built from the
# same YAML loads them and predicts the same"). Each YAML argument goes to the Keras
# constructor of the same name; tfc's own conventions are translated where docs/layers.md and
# docs/SPEC.md pin them (keras_args, construct, build). Used by keras_zoo_reverse.py and
# keras_fixtures_reverse.py; as a script:
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_from_yaml.py MODEL.yaml [W]
# prints the Keras summary (and loads W). Needs keras, keras-hub (its layers only), pyyaml and
# safetensors.
import re
import sys

import keras
import numpy as np
import yaml
from safetensors.numpy import load_file

# tfc's layers that are KerasHub's, not Keras's (docs/layers.md).
HUB_LAYERS = ("PositionEmbedding", "TokenAndPositionEmbedding")
# Keras's `call` arguments that tfc's YAML writes as layer arguments (docs/layers.md).
CALL_ARGS = {"MultiHeadAttention": ("use_causal_mask",),
             "GroupQueryAttention": ("use_causal_mask",),
             "Attention": ("use_causal_mask",),
             "AdditiveAttention": ("use_causal_mask",)}
# Arguments whose value is a layer ({Type: {args}}) or a list of them: an RNN's cell,
# StackedRNNCells' cells, a wrapper's layer (Bidirectional and TimeDistributed name theirs in
# construct). An inner layer without a `name` takes Keras's default, as in tfc (model.c).
NESTED_ARGS = ("cell", "cells", "layer", "backward_layer")
# tfc's `input:` keys that Keras's Input has no use for: the longest sequence of a
# variable-length input (SPEC §1), which only sizes tfc's buffers.
TFC_INPUT_KEYS = ("max_length",)


class ContractError(Exception):
    """The YAML, the Keras model or the weights file breaks the name-for-name contract."""


# Keras's classes whose name differs from the one Keras exports them as, the YAML's type
# (tfc_layer_ops.class_name): default names come from the class.
CLASS_NAMES = {"GroupQueryAttention": "GroupedQueryAttention"}


def snake_case(type_name):
    """Keras's default layer name (keras.src.utils.naming.to_snake_case of the class), as
    tfc's model.c."""
    type_name = CLASS_NAMES.get(type_name, type_name)
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", type_name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


def layer_names(layers):
    """tfc's names (src/graph/model.c): the YAML's `name`s first, then for each unnamed layer
    in order its snake-case type, then `_1`, `_2`, ... skipping names already taken."""
    names = [args.get("name") for _, args in layers]
    for i, (kind, _) in enumerate(layers):
        if names[i]:
            continue
        base, k = snake_case(kind), 0
        while True:
            cand = base if k == 0 else "%s_%d" % (base, k)
            if cand not in names[:i] + names[i + 1:]:
                break
            k += 1
        names[i] = cand
    return names


def initializer(value):
    """tfc's initializer forms, a name or {type: ..., args}, as a Keras initializer."""
    if isinstance(value, dict):
        args = dict(value)
        cls = type(keras.initializers.get(args.pop("type")))
        return cls(**args)
    return keras.initializers.get(value)


def regularizer_or_constraint(value, module):
    """tfc's regularizer and constraint forms (docs/layers.md) as a Keras object: a name;
    {type: name, args}; Keras's own {class_name, config}; or a regularizer's bare {l1, l2},
    which is Keras's L1L2."""
    if not isinstance(value, dict):
        return module.get(value)
    if "class_name" in value:
        return module.get(value)
    args = dict(value)
    kind = args.pop("type", None)
    if kind is None:
        return keras.regularizers.L1L2(**args)
    return type(module.get(kind))(**args)


def nested_layer(value):
    """A YAML layer inside another's arguments ({Type: {args}}, or a list of them) as a Keras
    layer; any other value as it is."""
    if isinstance(value, list):
        return [nested_layer(v) for v in value]
    if isinstance(value, dict) and len(value) == 1:
        (kind, args), = value.items()
        if isinstance(kind, str) and hasattr(keras.layers, kind):
            args = dict(args or {})
            return construct(kind, keras_args(kind, args), args.get("name"))
    return value


def keras_args(kind, args):
    """The constructor arguments of one YAML layer (nothing renamed: the contract is that the
    names are Keras's); `name`, `inputs` and Keras's call arguments are taken out."""
    out = {}
    for key, value in args.items():
        if key in ("name", "inputs") or key in CALL_ARGS.get(kind, ()):
            continue
        if key.endswith("_initializer") or (kind == "PositionEmbedding" and key == "initializer"):
            value = initializer(value)
        elif key.endswith("_regularizer"):
            value = regularizer_or_constraint(value, keras.regularizers)
        elif key.endswith("_constraint"):
            value = regularizer_or_constraint(value, keras.constraints)
        elif key in NESTED_ARGS and kind not in ("Bidirectional", "TimeDistributed"):
            value = nested_layer(value)
        out[key] = value
    return out


def construct(kind, args, name):
    """One Keras layer from a YAML type and its (translated) arguments."""
    if kind in HUB_LAYERS:
        import keras_hub
        cls = getattr(keras_hub.layers, kind)
    else:
        cls = getattr(keras.layers, kind, None)
        if cls is None:
            raise ContractError("layer type %s is not a Keras layer" % kind)
    if kind == "Bidirectional":
        (inner_kind, inner_args), = args["layer"].items()
        # tfc's weights are forward_<inner>/... for an inner layer of Keras's default name.
        args = dict(args, layer=construct(inner_kind, keras_args(inner_kind, inner_args or {}),
                                          snake_case(inner_kind)))
    if kind == "TimeDistributed":
        (inner_kind, inner_args), = args["layer"].items()
        inner_args = dict(inner_args or {})
        # tfc's weights are <name>/<inner>/...: the inner layer's name, else Keras's default
        inner_name = inner_args.pop("name", snake_case(inner_kind))
        args = dict(args, layer=construct(inner_kind, keras_args(inner_kind, inner_args),
                                          inner_name))
    try:
        return cls(name=name, **args)
    except TypeError as e:
        raise ContractError("%s(%s): Keras refuses the YAML's arguments: %s"
                            % (kind, ", ".join(sorted(args)), e)) from e


def item_of(item):
    """(type, args) of one `layers:` item: `- Type: {args}`, or a bare `- Type`."""
    if isinstance(item, str):
        return item, {}
    (kind, args), = item.items()
    return kind, dict(args or {})


def pipeline_names(layers):
    """Every layer's name by id() of its args, Pipelines' layers among them: tfc expands a
    Pipeline into its layers (src/graph/pipeline.h), which take their names as the model's
    own in the order written; each Pipeline then its `name` or Keras's default, inner ones
    first as Keras makes them (pipeline, pipeline_1, ...), skipping names taken. Pipeline's
    own `layers:` items are normalized in place to (type, args)."""
    flat, pipes = [], []

    def walk(kind, args):
        if kind != "Pipeline":
            flat.append((kind, args))
            return
        args["layers"] = [item_of(item) for item in args["layers"]]
        for inner in args["layers"]:
            walk(*inner)
        pipes.append(args)

    for kind, args in layers:
        walk(kind, args)
    names = {id(args): name for (_, args), name in zip(flat, layer_names(flat))}
    taken = set(names.values()) | {p["name"] for p in pipes if p.get("name")}
    for p in pipes:
        name, k = p.get("name"), 0
        while not name:
            cand = "pipeline" if k == 0 else "pipeline_%d" % k
            name = None if cand in taken else cand
            k += 1
        taken.add(name)
        names[id(p)] = name
    return names


def make(kind, args, names):
    """The Keras layer of one (type, args), a Pipeline with its layers, named as `names`."""
    if kind == "Pipeline":
        return keras.layers.Pipeline([make(k, a, names) for k, a in args["layers"]],
                                     name=names[id(args)])
    return construct(kind, keras_args(kind, args), names[id(args)])


def build(model_cfg):
    """A functional Keras model of a tfc model mapping (the YAML's top level): its `input:`,
    or a first `- InputLayer:` / `- Input:` item (Keras's Sequential form, SPEC §1); a bare
    `- Flatten` item is `- Flatten: {}`."""
    items = [{item: {}} if isinstance(item, str) else item for item in model_cfg["layers"]]
    input_name = None
    if "input" in model_cfg:
        inp = dict(model_cfg["input"])
    else:
        (kind, inp), = items.pop(0).items()
        if kind not in ("InputLayer", "Input"):
            raise ContractError("no input: neither `input:` nor a first InputLayer")
        inp = {k: v for k, v in (inp or {}).items()
               if k not in ("sparse", "ragged", "optional", "batch_size")}
        input_name = inp.pop("name", "input_layer")
        if "batch_shape" in inp:
            inp["shape"] = inp.pop("batch_shape")[1:]
    for key in TFC_INPUT_KEYS:
        inp.pop(key, None)
    shape = tuple(inp.pop("shape"))
    dtype = inp.pop("dtype", "float32")
    if inp:
        raise ContractError("input keys not translated to Keras: %s" % sorted(inp))
    x = keras.Input(shape=shape, dtype=dtype, name="input")
    layers = [item_of(item) for item in items]
    names = pipeline_names(layers)
    outputs = {"input": x}
    if input_name:
        outputs[input_name] = x
    prev = x
    for kind, args in layers:
        name = names[id(args)]
        inputs = args.get("inputs")
        if inputs is None:
            srcs = [prev]
        else:
            srcs = [outputs[n] for n in ([inputs] if isinstance(inputs, str) else inputs)]
        layer = make(kind, args, names)
        call_kw = {k: args[k] for k in CALL_ARGS.get(kind, ()) if k in args}
        if kind in ("MultiHeadAttention", "GroupQueryAttention"):
            # [query, value] or [query, value, key]; alone: self-attention.
            q, v, k = (srcs * 3)[:3] if len(srcs) == 1 else (srcs + srcs[1:2])[:3]
            y = layer(q, v, key=k, **call_kw)
        elif len(srcs) > 1 or kind in ("Add", "Multiply", "Concatenate", "Dot"):
            y = layer(srcs, **call_kw)  # the merges, Attention's [query, value(, key)]
        else:
            (src,) = srcs
            y = layer(src, **call_kw)
        outputs[name] = prev = y
    return keras.Model(x, prev, name=model_cfg.get("name", "model"))


def build_text(text):
    """build() of a model YAML's text."""
    return build(yaml.safe_load(text))


def tfc_name(path):
    """Keras 3's variable path without the recurrent cell's segment (SPEC §5):
    bidirectional/forward_gru/gru_cell/kernel -> bidirectional/forward_gru/kernel; of
    StackedRNNCells, its own segment goes and each cell's stays (rnn/stacked_rnn_cells/
    gru_cell_1/kernel -> rnn/gru_cell_1/kernel)."""
    parts = path.split("/")
    stacked = [p for p in parts if re.fullmatch(r"stacked_rnn_cells(_\d+)?", p)]
    if stacked:
        return "/".join(p for p in parts if p not in stacked)
    return "/".join(p for p in parts if not re.fullmatch(r"\w*_cell(_\d+)?", p))


def load_weights(model, path, tensors=None):
    """Assigns every Keras variable from the tfc safetensors file by name (or from `tensors`,
    the file's weights read already); every tensor must be used exactly once and every
    variable found, with its shape."""
    if tensors is None:
        tensors = load_file(path)
    used, missing, errors = set(), [], []
    for v in model.weights:
        name = tfc_name(v.path)
        if name in used:
            errors.append("two Keras variables map to %s" % name)
        elif name not in tensors:
            missing.append("%s (%s, Keras path %s)" % (name, tuple(v.shape), v.path))
        elif tuple(tensors[name].shape) != tuple(v.shape):
            errors.append("%s: file %s, Keras %s" % (name, tensors[name].shape, tuple(v.shape)))
        else:
            v.assign(tensors[name])
        used.add(name)
    for layer in model.layers:  # as Keras's load_own_variables: Normalization's mean, variance
        if hasattr(layer, "finalize_state"):
            layer.finalize_state()
    unused = sorted(set(tensors) - used)
    if missing:
        errors.append("Keras variables not in the file: " + ", ".join(missing))
    if unused:
        errors.append("tensors of the file no Keras variable took: " + ", ".join(unused))
    if errors:
        raise ContractError("%s: %s" % (path, "; ".join(errors)))
    return len(used)


def load_model(yaml_path, weights_path=None):
    """build() of a model YAML file, with its weights loaded when a file is given."""
    with open(yaml_path) as f:
        model = build_text(f.read())
    if weights_path:
        load_weights(model, weights_path)
    return model


def predict(model, x):
    """Inference mode: dropout off, augmentation the identity, BN's moving statistics."""
    return np.asarray(model(x, training=False), dtype=np.float32)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__ or "usage: keras_from_yaml.py MODEL.yaml [WEIGHTS.safetensors]")
    m = load_model(*sys.argv[1:])
    m.summary()
