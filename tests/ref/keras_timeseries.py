"""Keras 3 references for the `timeseries:` windows of the csv and npy sources
(tests/test_data_timeseries.c).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_timeseries.py
Writes tests/ref/timeseries/cases.safetensors: a table `table` [40, 3] (float32, values with
few digits, so that the C test's CSV copy reads back the same bits), a regression column `y`
[40] (float32), a class column `cls` [40] (int32, 0-3), and per case the windows
`x_<case>` [n, T, ...] and targets `y_<case>` [n, ...] that
keras.utils.timeseries_dataset_from_array gives (batch_size=None, shuffle=False, the
default format "tf"). Metadata `cases` has one line per case, `name|source|timeseries`:
the source the C test reads the table through (csv: targets y; csv_int: targets cls; csv_none:
no targets; npy: features table.npy, labels y.npy; npy_vec: labels [y, 2y] [40, 2]; npy_1d:
features table[:, 0] [40]) and the `timeseries:` mapping, whose `target_offset: d` stands for
Keras's `targets=labels[d:]` (with `data` the whole table).
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "timeseries")
N = 40

# name, source, timeseries arguments (Keras's names; target_offset is tfc's)
CASES = [
    ("plain", "csv", dict(sequence_length=5, target_offset=5)),
    ("stride_rate", "csv", dict(sequence_length=4, sequence_stride=3, sampling_rate=2)),
    ("start_end", "csv", dict(sequence_length=3, sampling_rate=3, start_index=4, end_index=30,
                              target_offset=2)),
    ("start_only", "csv", dict(sequence_length=6, sequence_stride=2, start_index=10,
                               target_offset=3)),
    ("end_only", "csv", dict(sequence_length=5, sequence_stride=4, end_index=25,
                             target_offset=3)),
    ("jena_like", "csv", dict(sequence_length=3, sampling_rate=6, target_offset=15)),
    ("classes", "csv_int", dict(sequence_length=2, sampling_rate=4, target_offset=1)),
    ("no_targets", "csv_none", dict(sequence_length=7, sequence_stride=5)),
    ("npy", "npy", dict(sequence_length=4, sequence_stride=2, sampling_rate=3, start_index=1,
                        target_offset=4)),
    ("npy_vector", "npy_vec", dict(sequence_length=5, sequence_stride=3, target_offset=6)),
    ("npy_1d", "npy_1d", dict(sequence_length=8, sampling_rate=2, end_index=39,
                              target_offset=1)),
    ("one_window", "csv", dict(sequence_length=40)),
]


def yaml_of(args):
    return "{" + ", ".join(f"{k}: {v}" for k, v in args.items()) + "}"


def main():
    rng = np.random.default_rng(5)
    table = np.round(rng.normal(size=(N, 3)), 3).astype(np.float32)
    y = np.round(rng.normal(size=N) * 10, 2).astype(np.float32)
    cls = rng.integers(0, 4, size=N).astype(np.int32)
    tensors = {"table": table, "y": y, "cls": cls}
    lines = []
    for name, source, args in CASES:
        kw = dict(args)
        offset = kw.pop("target_offset", 0)
        data = table[:, 0] if source == "npy_1d" else table
        labels = {"csv_int": cls, "csv_none": None, "npy_vec": np.stack([y, 2 * y], 1)}.get(
            source, y)
        targets = None if labels is None else labels[offset:]
        ds = keras.utils.timeseries_dataset_from_array(data, targets, batch_size=None, **kw)
        xs, ts = [], []
        for el in ds:
            if targets is None:
                xs.append(np.asarray(el))
            else:
                xs.append(np.asarray(el[0]))
                ts.append(np.asarray(el[1]))
        assert xs, name
        tensors["x_" + name] = np.stack(xs)
        if ts:
            tensors["y_" + name] = np.stack(ts)
        lines.append(f"{name}|{source}|{yaml_of(args)}")
        print(name, tensors["x_" + name].shape, len(ts))
    meta = {"cases": "\n".join(lines), "keras": keras.__version__}
    os.makedirs(OUT, exist_ok=True)
    save_file(tensors, os.path.join(OUT, "cases.safetensors"), metadata=meta)


if __name__ == "__main__":
    main()
