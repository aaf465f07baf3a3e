"""Keras 3 references for the text_vectorization map op (tests/test_text_vectorization.c).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_text_vectorization.py
Writes tests/ref/text_vectorization/text_vectorization.safetensors. Its metadata holds
`corpus` and `inputs` (records as comma-separated hex strings: they hold tabs, non-ASCII
letters, invalid UTF-8), `cases` (the case names, comma-separated), and per case
`args_<name>` (the op's keys = TextVectorization's arguments, as JSON, which is YAML) and
`vocab_<name>` (every get_vocabulary() entry in hex, comma-separated); tf_idf cases have
Keras's idf_weights as tensor `idf_<name>`. Each case adapts a TextVectorization on the corpus (or takes the vocabulary it is given) and
calls it on the inputs one record at a time: tensor `<name>` holds the outputs, one row per
input (int32 ids, zero-padded to the longest row when there is no output_sequence_length,
as Keras pads a batch; float32 vectors for the other output modes).
"""
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import numpy as np
import tensorflow as tf
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "text_vectorization")

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "zebra", "Apple", "café",
         "don't", "x-ray", "U.S.A.", "naïve", "THE", "Cat!", "(dog)", "mat,", "#1"]


def corpus():
    rng = np.random.default_rng(7)
    out = []
    for i in range(60):
        n = int(rng.integers(0, 12))
        seps = [" ", " ", "  ", "\t", "\x0b", "\x0c", " \x1c"]
        words = [WORDS[int(rng.integers(0, len(WORDS)))] for _ in range(n)]
        s = ""
        for k, w in enumerate(words):
            s += (seps[int(rng.integers(0, len(seps)))] if k else "") + w
        if i % 7 == 3:
            s = " " + s + " "
        out.append(s.encode())
    out += [b"", b"   ", b"ab\xffcd \xe2\x82x \xc0\xafy", b"\xed\xa0\x80 tail", b"!!! ...",
            b"Caf\xc3\xa9 CAF\xc3\x89 \xc3\x84pfel"]
    return out


INPUTS = [b"the cat sat on the mat", b"THE  DOG ran\tto the Zebra!", b"", b"   ",
          b"unknown words only", b"don't x-ray U.S.A. caf\xc3\xa9 na\xc3\xafve",
          b"a a a a a a a a a a a a a a a a a a a a a a a", b"ab\xffcd \xe2\x82x",
          b"cat cat dog", b"mat, (dog) #1 Cat!"]

CASES = [
    ("default", {}),
    ("capped", {"max_tokens": 12, "output_sequence_length": 6}),
    ("chars", {"standardize": None, "split": "character", "output_sequence_length": 20}),
    ("lower_bigrams", {"standardize": "lower", "ngrams": 2, "max_tokens": 40}),
    ("strip_ngrams_2_3", {"standardize": "strip_punctuation", "ngrams": [2, 3],
                          "output_sequence_length": 8}),
    ("whole", {"split": None, "output_sequence_length": 1}),
    ("multi_hot", {"max_tokens": 10, "output_mode": "multi_hot"}),
    ("count_padded", {"max_tokens": 30, "output_mode": "count", "pad_to_max_tokens": True}),
    ("tf_idf", {"output_mode": "tf_idf", "ngrams": 2}),
    ("tf_idf_padded", {"output_mode": "tf_idf", "max_tokens": 16, "pad_to_max_tokens": True}),
    ("one_hot", {"split": None, "output_mode": "one_hot", "max_tokens": 8}),
    ("given", {"vocabulary": ["the", "cat", "dog", "mat", "x"], "output_sequence_length": 5}),
    ("given_specials", {"vocabulary": ["", "[UNK]", "dog", "cat"]}),
    ("given_idf", {"vocabulary": ["the", "cat", "dog"], "idf_weights": [0.5, 1.5, 2.0],
                   "output_mode": "tf_idf"}),
    ("given_idf_padded", {"vocabulary": ["[UNK]", "the", "cat"], "idf_weights": [0.25, 0.5, 1.5],
                          "output_mode": "tf_idf", "max_tokens": 6, "pad_to_max_tokens": True}),
]


def keras_args(args):
    a = dict(args)
    if isinstance(a.get("ngrams"), list):
        a["ngrams"] = tuple(a["ngrams"])
    return a


def vocabulary_bytes(layer):
    """get_vocabulary() as bytes: Keras's own decodes tokens as UTF-8 and fails on the
    invalid bytes a whitespace split keeps, so this reads the lookup table directly."""
    look = layer._lookup_layer
    keys, values = look.lookup_table.export()
    vocab = [b"[UNK]"] * look.vocabulary_size()
    for k, v in zip(keys.numpy(), values.numpy()):
        vocab[int(v)] = bytes(k)
    if look.output_mode == "int":
        vocab[0] = b""
    return vocab


def main():
    os.makedirs(OUT, exist_ok=True)
    data = corpus()
    tensors, cases, meta = {}, [], {}
    for name, args in CASES:
        layer = L.TextVectorization(**keras_args(args))
        if "vocabulary" not in args:
            layer.adapt(tf.constant(data))
        rows = [np.asarray(layer(tf.constant([[s]]))[0]).reshape(-1) for s in INPUTS]
        if layer._output_mode == "int":
            width = max(1, max(len(r) for r in rows))
            out = np.zeros((len(rows), width), np.int32)
            for i, r in enumerate(rows):
                out[i, :len(r)] = r
        else:
            out = np.stack(rows).astype(np.float32)
        tensors[name] = out
        vocab = vocabulary_bytes(layer)
        meta["args_" + name] = json.dumps(args)
        meta["vocab_" + name] = ",".join(v.hex() for v in vocab)
        if layer._output_mode == "tf_idf":
            tensors["idf_" + name] = np.asarray(layer._lookup_layer.idf_weights_const,
                                                np.float32)
        cases.append(name)
        print(f"{name}: vocabulary {len(vocab)}, output {out.shape}")
    meta["corpus"] = ",".join(s.hex() for s in data)
    meta["inputs"] = ",".join(s.hex() for s in INPUTS)
    meta["cases"] = ",".join(cases)
    save_file(tensors, os.path.join(OUT, "text_vectorization.safetensors"), metadata=meta)


if __name__ == "__main__":
    main()
