#!/usr/bin/env python3
"""tfc's text_vectorization op against Keras 3's TextVectorization, in one run on one machine.

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python bench/text_vectorization.py [ROUNDS]
(needs `apt-get install fortunes`, a built bin/, and Keras with TensorFlow in the venv).

The work is configs/fortunes_bag_of_bigrams.yaml's: adapt a vocabulary of the 20000 most
frequent words and bigrams over the 4747 training records, then make the multi_hot vector of
every training record. tfc: `tfc-data configs/fortunes_bag_of_bigrams.yaml --take 149` (the
train split, batches of 32: 4768 records, its source read, adapted and vectorized in one
process). Keras: TextVectorization(max_tokens=20000, ngrams=2, output_mode="multi_hot",
pad_to_max_tokens=True).adapt() on the same records, then the layer called on them in batches
of 32 (as a tf.data map would); Python starts once, so Keras's time excludes its imports and
tfc's includes its process start. Rounds are interleaved; medians are printed with the ratio.
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for tfc (a user's machine has neither).
"""
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("TFC_BIN", os.path.join(ROOT, "bin"))
FILES = ["computers", "definitions", "politics", "science", "songs-poems", "startrek",
         "zippy", "food"]


def records():
    """The train split's records, as the text source reads them (fortune format)."""
    out, r = [], 0
    for name in FILES:
        with open("/usr/share/games/fortunes/" + name, "rb") as f:
            text = f.read()
        cur = []
        for line in text.split(b"\n") + [b"%"]:
            if line.rstrip(b"\r") == b"%":
                rec = b"\n".join(cur).strip(b"\r\n")
                cur = []
                if rec.strip():
                    if r % 10:
                        out.append(rec)
                    r += 1
            else:
                cur.append(line)
    return out


def run_tfc():
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    t = time.perf_counter()
    subprocess.run([os.path.join(BIN, "tfc-data"),
                    os.path.join(ROOT, "configs/fortunes_bag_of_bigrams.yaml"), "--take", "149"],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def run_keras(data):
    t = time.perf_counter()
    tv = keras.layers.TextVectorization(max_tokens=20000, ngrams=2, output_mode="multi_hot",
                                        pad_to_max_tokens=True)
    tv.adapt(tf.constant(data))
    for i in range(0, len(data), 32):
        np.asarray(tv(tf.constant(data[i:i + 32])))
    return time.perf_counter() - t


def main(rounds):
    data = records()
    print("%d training records; %d interleaved rounds" % (len(data), rounds))
    run_keras(data[:64])  # Keras's first call builds its graph: not counted
    t_tfc, t_keras = [], []
    for _ in range(rounds):
        t_tfc.append(run_tfc())
        t_keras.append(run_keras(data))
    a, b = statistics.median(t_tfc), statistics.median(t_keras)
    print("tfc-data (adapt + vectorize, process included): median %.3f s" % a)
    print("Keras TextVectorization (adapt + vectorize):     median %.3f s" % b)
    print("Keras / tfc: %.1fx" % (b / a))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
