"""Keras 3's run of configs/fortunes_bag_of_bigrams.yaml, the peer of README's figures for it.

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python bench/keras_bag_of_bigrams.py [SEED [VOCAB_OUT]]
(needs `apt-get install fortunes`). Reads the same 8 fortune files as tfc's text source
(records between lines holding only %, blank records left out, every 10th record held out),
adapts TextVectorization(max_tokens=20000, ngrams=2, output_mode="multi_hot",
pad_to_max_tokens=True) on the 4747 training records, trains Dense 16 relu -> Dropout 0.5 ->
Dense 8 softmax with Adam(CosineDecay(0.002, 1000)) for 1000 steps of 32 shuffled records,
and prints the test loss and accuracy on the 528 held-out records. With VOCAB_OUT it writes
get_vocabulary() there, one entry per line.
"""
import os, time, sys
os.environ.setdefault("KERAS_BACKEND", "jax")
import numpy as np, keras, tensorflow as tf
FILES = ["computers", "definitions", "politics", "science", "songs-poems", "startrek", "zippy", "food"]
recs, labels = [], []
for k, f in enumerate(FILES):
    text = open("/usr/share/games/fortunes/" + f, "rb").read().decode("utf-8", "replace")
    cur = []
    for line in text.split("\n"):
        if line == "%":
            r = "\n".join(cur)
            if r.strip(): recs.append(r); labels.append(k)
            cur = []
        else: cur.append(line)
    r = "\n".join(cur).rstrip("\n")
    if r.strip(): recs.append(r); labels.append(k)
recs = np.array(recs); labels = np.array(labels)
test = np.arange(len(recs)) % 10 == 0
xtr, ytr, xte, yte = recs[~test], labels[~test], recs[test], labels[test]
print(len(xtr), len(xte))
t0 = time.time()
tv = keras.layers.TextVectorization(max_tokens=20000, ngrams=2, output_mode="multi_hot", pad_to_max_tokens=True)
tv.adapt(tf.constant(xtr))
Xtr = np.asarray(tv(tf.constant(xtr))); Xte = np.asarray(tv(tf.constant(xte)))
t1 = time.time()
keras.utils.set_random_seed(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
m = keras.Sequential([keras.Input((20000,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dropout(0.5), keras.layers.Dense(8, activation="softmax")])
sched = keras.optimizers.schedules.CosineDecay(0.002, 1000)
m.compile(optimizer=keras.optimizers.Adam(sched), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
ds = tf.data.Dataset.from_tensor_slices((Xtr, ytr)).shuffle(5000, seed=1).repeat().batch(32).take(1000)
m.fit(ds, epochs=1, steps_per_epoch=1000, verbose=0)
t2 = time.time()
print("keras: adapt+vectorize %.1f s, fit %.1f s, test" % (t1 - t0, t2 - t1), m.evaluate(Xte, yte, verbose=0))
if len(sys.argv) > 2:  # the adapted vocabulary, to compare with the run's vocabulary.txt
    open(sys.argv[2], "w").write("\n".join(tv.get_vocabulary()) + "\n")
