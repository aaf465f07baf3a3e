#!/usr/bin/env python3
# Raw text in, predictions out, in tfc and in Keras: a run trained with the text_vectorization
# map op (its RUN/config.yaml, RUN/final.safetensors and the vocabulary.txt the train split
# adapted) predicts lines of text with `tfc-predict --text`; Keras 3 builds a
# TextVectorization from the same settings and vocabulary (set, not adapted) and the model of
# the run's YAML with its weights loaded by name (keras_from_yaml.py), and predicts the same
# lines. Prints the largest differences of the vectors and of the predicted probabilities, and
# exits 1 above the tolerance. Not part of `make test` (it needs a trained run):
#   tfc-train configs/fortunes_bag_of_bigrams.yaml --out RUN
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_text_predict.py RUN [LINES]
# LINES: a text file, one input per line (default: the fortunes' held-out records, joined
# onto one line each, the first 200). TFC_BIN names the tools' folder (default bin/).
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import keras_from_yaml  # noqa: E402

BIN = os.environ.get("TFC_BIN", os.path.join(ROOT, "bin"))
TOLERANCE = 1e-5


def unescape(token):
    """A token of tfc's vocabulary file (docs/data.md, Vocabularies) as bytes."""
    out, i = bytearray(), 0
    while i < len(token):
        if token[i:i + 1] != b"\\":
            out += token[i:i + 1]
            i += 1
        elif token[i + 1:i + 2] == b"x":
            out.append(int(token[i + 2:i + 4], 16))
            i += 4
        else:
            out += {b"\\": b"\\", b"n": b"\n", b"t": b"\t", b"r": b"\r", b"s": b" "}[
                token[i + 1:i + 2]]
            i += 2
    return bytes(out)


def read_vocabulary(path):
    """(settings from the header, tokens with the special ones, idf weights or None)."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    header = lines[0].decode()
    settings = dict(kv.split("=") for kv in header.split()[4:])
    if settings.get("tokenizer") != "keras":
        raise SystemExit("%s: not a text_vectorization vocabulary (%s)" % (path, header))
    tokens, idf = [], []
    for line in lines[1:-1]:
        if settings["output_mode"] == "tf_idf":
            line, w = line.rsplit(b"\t", 1)
            idf.append(float(w))
        tokens.append(unescape(line).decode("utf-8"))
    return settings, tokens, (np.array(idf, np.float32) if idf else None)


def the_op(solver):
    """The text_vectorization map of the solver's test pipeline (its arguments)."""
    for stage in solver["data"]["test"]["pipeline"]:
        (kind, args), = stage.items()
        if kind == "map" and args.get("op") == "text_vectorization":
            return {k: v for k, v in args.items() if k not in ("op", "num_parallel_calls")}
    raise SystemExit("the solver's test pipeline has no text_vectorization map")


def held_out_lines(solver, path, count=200):
    """The first `count` records of the test split (tfc-data --output of the raw source would
    vectorize them, so the records are read here as the text source reads them)."""
    src = solver["data"]["test"]["source"]
    every, offset = src["split"]["every"], src["split"].get("offset", 0)
    records, r = [], 0
    for name in src["files"]:
        with open(name, "rb") as f:
            text = f.read()
        for rec in re.split(rb"\r?\n%\r?\n", text):
            rec = rec.strip(b"\r\n")
            if not rec.strip():
                continue
            if r % every == offset:
                records.append(b" ".join(rec.split(b"\n")))
            r += 1
    with open(path, "wb") as f:
        f.write(b"\n".join(records[:count]) + b"\n")
    return path


def main(run, lines=None):
    import keras
    import tensorflow as tf

    with open(os.path.join(run, "config.yaml")) as f:
        solver = yaml.safe_load(f)
    args = the_op(solver)
    settings, tokens, idf = read_vocabulary(os.path.join(run, "vocabulary.txt"))
    with tempfile.TemporaryDirectory() as tmp:
        if lines is None:
            lines = held_out_lines(solver, os.path.join(tmp, "lines.txt"))
        model_yaml = os.path.join(tmp, "model.yaml")
        with open(model_yaml, "w") as f:
            yaml.safe_dump(solver["model"], f)
        weights = os.path.join(run, "final.safetensors")
        y_path = os.path.join(tmp, "y.npy")
        subprocess.run([os.path.join(BIN, "tfc-predict"), os.path.join(run, "config.yaml"),
                        "--weights", weights, "--text", lines, "--output", y_path,
                        "--device", "cpu"], check=True, stdout=subprocess.DEVNULL)
        y_tfc = np.load(y_path)
        with open(lines, "rb") as f:
            texts = [t for t in f.read().split(b"\n")[:-1]]
        model = keras_from_yaml.load_model(model_yaml, weights)
    kargs = dict(args)
    if isinstance(kargs.get("ngrams"), list):
        kargs["ngrams"] = tuple(kargs["ngrams"])
    kargs.pop("vocabulary", None)
    kargs.pop("idf_weights", None)
    tv = keras.layers.TextVectorization(**kargs)
    if idf is not None:
        tv.set_vocabulary(tokens, idf_weights=idf)
    else:
        tv.set_vocabulary(tokens)
    x = np.asarray(tv(tf.constant(texts)))
    y_keras = keras_from_yaml.predict(model, x)
    same_vocab = tv.get_vocabulary() == tokens
    diff = float(np.abs(y_tfc - y_keras).max()) if y_tfc.shape == y_keras.shape else np.inf
    agree = float((y_tfc.argmax(1) == y_keras.argmax(1)).mean()) if np.isfinite(diff) else 0
    print("%s: %d texts, vocabulary %d (%s), outputs %s, max |tfc - keras| %.3g, same class "
          "for %.1f%%" % (run, len(texts), len(tokens), "the same" if same_vocab else "DIFFERS",
                          "x".join(map(str, y_keras.shape)), diff, 100 * agree))
    return 0 if same_vocab and diff <= TOLERANCE else 1


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__ if __doc__ else "usage: keras_text_predict.py RUN [LINES]")
    sys.exit(main(*sys.argv[1:]))
