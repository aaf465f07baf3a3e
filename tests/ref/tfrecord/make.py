#!/usr/bin/env python3
# Writes the TFRecord fixtures of tests/test_data_tfrecord.c with TensorFlow itself. Not run by
# `make test` (TensorFlow is not a CI dependency); the files it wrote are committed beside it.
# To regenerate (TensorFlow 2.21, tensorflow-cpu from PyPI, in a venv):
#   python3 tests/ref/tfrecord/make.py /usr/share/datasets/fashion-mnist tests/ref/tfrecord
# fashion8.tfrecord (and .gz, GZIP): the first 8 Fashion-MNIST training images, each as
#   image      bytes_list: the 784 raw uint8 pixels (tobytes)
#   image_png  bytes_list: the same image, tf.io.encode_png
#   pixels     float_list: the pixels / 255 (784 float32)
#   label      int64_list: the class
# fashion8.images.npy, fashion8.labels.npy: the same images (8, 28, 28, 1) uint8 and labels
#   int64, for the test to compare against.
# seq.tfrecord: variable-length sequences for shape [-1]:
#   tokens     int64_list, packed (TF's own encoding), lengths 3, 1, 4, 1, 5, 9, 2, 6
#   weights    float_list of the same lengths (tokens / 2)
#   label      int64_list: length % 3
import gzip, os, struct, sys
import numpy as np
import tensorflow as tf

src = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"
out = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))

with gzip.open(os.path.join(src, "train-images-idx3-ubyte.gz")) as f:
    f.read(16)
    images = np.frombuffer(f.read(8 * 784), np.uint8).reshape(8, 28, 28, 1)
with gzip.open(os.path.join(src, "train-labels-idx1-ubyte.gz")) as f:
    f.read(8)
    labels = np.frombuffer(f.read(8), np.uint8).astype(np.int64)

def feature(kind, values):
    if kind == "bytes":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

def fashion_examples():
    for img, lab in zip(images, labels):
        yield tf.train.Example(features=tf.train.Features(feature={
            "image": feature("bytes", [img.tobytes()]),
            "image_png": feature("bytes", [tf.io.encode_png(img).numpy()]),
            "pixels": feature("float", (img.reshape(-1) / 255.0).astype(np.float32).tolist()),
            "label": feature("int64", [int(lab)]),
        })).SerializeToString()

for name, options in (("fashion8.tfrecord", None), ("fashion8.tfrecord.gz", "GZIP")):
    with tf.io.TFRecordWriter(os.path.join(out, name), options=options) as w:
        for rec in fashion_examples():
            w.write(rec)
np.save(os.path.join(out, "fashion8.images.npy"), images)
np.save(os.path.join(out, "fashion8.labels.npy"), labels)

with tf.io.TFRecordWriter(os.path.join(out, "seq.tfrecord")) as w:
    for i, n in enumerate([3, 1, 4, 1, 5, 9, 2, 6]):
        tokens = [(i * 7 + k * 3) % 50 + 1 for k in range(n)]
        w.write(tf.train.Example(features=tf.train.Features(feature={
            "tokens": feature("int64", tokens),
            "weights": feature("float", [t / 2 for t in tokens]),
            "label": feature("int64", [n % 3]),
        })).SerializeToString())

# What tf.data reads back, printed for the record (the test asserts the same values).
ds = tf.data.TFRecordDataset(os.path.join(out, "seq.tfrecord")).map(
    lambda r: tf.io.parse_single_example(r, {"tokens": tf.io.VarLenFeature(tf.int64)}))
for e in ds:
    print(tf.sparse.to_dense(e["tokens"]).numpy().tolist())
