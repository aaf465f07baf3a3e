#!/usr/bin/env python3
# Keras loads tfc's weights: for each model_zoo/ model, a few records of its test split (the
# solver's own test pipeline, through tfc-data) go through tfc-predict and through the Keras
# model that keras_from_yaml.py builds from the same model.yaml and loads with the zoo's
# safetensors by name; prints max abs and max relative difference per model and exits 1 when
# one is above its tolerance (or fails to build or load). tests/ref/reverse/layers.yaml adds
# the layer types no zoo model and no fixture uses, with weights Keras draws and tfc loads.
# Needs the data packages (fashion-mnist, fortunes) and a built bin/; not part of `make test`
# (`make ref-zoo`):
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_zoo_reverse.py [MODEL...]
# TFC_BIN names the tools' folder (default: bin/ of this checkout); RECORDS the records per
# model (default 16).
import os
import subprocess
import sys
import tempfile

import numpy as np
import yaml
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import keras_from_yaml  # noqa: E402

BIN = os.environ.get("TFC_BIN", os.path.join(ROOT, "bin"))
RECORDS = int(os.environ.get("RECORDS", "16"))
# Relative difference: max |tfc - keras| over the outputs / max |keras| (a float32 forward
# pass in either; softmax outputs near 0 make an element-wise ratio meaningless).
TOLERANCE = 1e-5
# Models with weights drawn here (layer types no zoo model and no fixture covers), by path.
DRAWN = ["tests/ref/reverse/attention.yaml", "tests/ref/reverse/layers.yaml"]


def test_records(model_dir, out_prefix):
    """The first RECORDS records of the zoo solver's test split, preprocessed by its test
    pipeline (tfc-data), as [N, input shape...]."""
    solver = os.path.join(model_dir, "solver.yaml")
    with open(solver) as f:
        pipeline = yaml.safe_load(f)["data"]["test"]["pipeline"]
    sets = []
    for i, stage in enumerate(pipeline):
        (op, args), = stage.items()
        if op in ("batch", "padded_batch"):
            sets += ["--set", "data.test.pipeline.%d.%s.batch_size=%d" % (i, op, RECORDS)]
    subprocess.run([os.path.join(BIN, "tfc-data"), solver, "--split", "test", "--take", "1",
                    "--output", out_prefix] + sets, check=True, stdout=subprocess.DEVNULL)
    return np.load(out_prefix + ".features.npy")


def tfc_predict(model_yaml, weights, x_path, y_path):
    subprocess.run([os.path.join(BIN, "tfc-predict"), model_yaml,
                    "--weights", weights, "--input", x_path, "--output", y_path,
                    "--device", "cpu"], check=True, stdout=subprocess.DEVNULL)
    return np.load(y_path)


def zoo_case(name, tmp):
    """(model.yaml, weights, test records) of a zoo model."""
    model_dir = os.path.join(ROOT, "model_zoo", name)
    weights = os.path.join(model_dir, name + ".safetensors")
    return (os.path.join(model_dir, "model.yaml"), weights,
            test_records(model_dir, os.path.join(tmp, name)))


def drawn_case(yaml_path, tmp):
    """(yaml, weights, inputs) of a model with no trained weights: Keras draws them (seeded
    normals) and saves them under tfc's names; inputs uniform in [0, 1), or token ids in
    [1, 10) right-padded with 0 to random lengths (12 steps for a [null] input)."""
    model = keras_from_yaml.load_model(yaml_path)
    rng = np.random.default_rng(1)
    tensors = {}
    for v in model.weights:
        tensors[keras_from_yaml.tfc_name(v.path)] = (
            0.5 * rng.standard_normal(v.shape)).astype(np.float32)
    weights = os.path.join(tmp, os.path.basename(yaml_path) + ".safetensors")
    save_file(tensors, weights)
    shape = (RECORDS,) + tuple(model.inputs[0].shape[1:])
    if model.inputs[0].dtype == "int32":
        shape = (RECORDS, 12) if None in shape else shape
        ids = rng.integers(1, 10, shape, dtype=np.int32)
        ids[np.arange(shape[1]) >= rng.integers(1, shape[1] + 1, (RECORDS, 1))] = 0
        return yaml_path, weights, ids
    return yaml_path, weights, rng.uniform(0, 1, shape).astype(np.float32)


def compare(name, tmp):
    """(input shapes, max abs, max rel) of tfc against Keras on the case's inputs; a
    variable-length model ([null] steps) also runs them cut to half their length."""
    keras_from_yaml.keras.utils.clear_session()
    if name.endswith(".yaml"):
        model_yaml, weights, x = drawn_case(os.path.join(ROOT, name), tmp)
    else:
        model_yaml, weights, x = zoo_case(name, tmp)
    model = keras_from_yaml.load_model(model_yaml, weights)
    batches = [x]
    if None in model.inputs[0].shape[1:]:
        batches.append(x[:, : x.shape[1] // 2])
    abs_max = rel = 0.0
    for i, xb in enumerate(batches):
        x_path = os.path.join(tmp, "x%d.npy" % i)
        np.save(x_path, xb)
        y_tfc = tfc_predict(model_yaml, weights, x_path, os.path.join(tmp, "y.npy"))
        y_keras = keras_from_yaml.predict(model, xb)
        if y_tfc.shape != y_keras.shape:
            raise keras_from_yaml.ContractError("output shapes differ: tfc %s, Keras %s"
                                                % (y_tfc.shape, y_keras.shape))
        diff = float(np.abs(y_tfc.astype(np.float64) - y_keras).max())
        abs_max = max(abs_max, diff)
        rel = max(rel, diff / max(float(np.abs(y_keras).max()), 1e-30))
    return " ".join("x".join(map(str, b.shape)) for b in batches), abs_max, rel


def main(names):
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            try:
                shape, abs_max, rel = compare(name, tmp)
            except Exception as e:  # any failure of one case is reported, then the next
                print("%-20s FAILED: %s: %s" % (name, type(e).__name__, e), flush=True)
                failed.append(name)
                continue
            ok = rel <= TOLERANCE
            print("%-20s input %-16s max abs %.3e  max rel %.3e  %s"
                  % (name, shape, abs_max, rel, "ok" if ok else "ABOVE"),
                  flush=True)
            if not ok:
                failed.append(name)
    if failed:
        print("failed: " + " ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    zoo = os.path.join(ROOT, "model_zoo")
    sys.exit(main(sys.argv[1:] or sorted(os.listdir(zoo)) + DRAWN))
