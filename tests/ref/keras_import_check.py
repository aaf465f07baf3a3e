#!/usr/bin/env python3
# tfc-import against Keras itself, over every model the reverse checks build: each
# model_zoo/ model with its weights, each fixture under tests/ref/ that records its YAML with
# Keras's weights, and tests/ref/reverse/*.yaml with weights Keras draws. keras_from_yaml.py
# builds the Keras model and loads the weights; Keras saves it three ways (a .keras archive;
# model.to_json() with model.save_weights' .weights.h5; the legacy .h5 where Keras writes one)
# and tfc-import reads each back. The weights tfc-import writes must be the weights Keras
# held, name for name and bit for bit, and the model file must give the same parameter
# count; where the fixture has inputs, tfc-predict on the imported model must give Keras's
# outputs (TOLERANCE of the largest). Not part of `make test` (`make ref-import`):
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_import_check.py [NAME...]
# TFC_BIN names the tools' folder (default: bin/ of this checkout).
import glob
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import keras_from_yaml  # noqa: E402
import keras_fixtures_reverse  # noqa: E402

BIN = os.environ.get("TFC_BIN", os.path.join(ROOT, "bin"))
TOLERANCE = 1e-5
keras = keras_from_yaml.keras


def models():
    """(name, yaml text, {tfc name: weight} or None to draw, [(x, y)])."""
    for path in sorted(glob.glob(os.path.join(ROOT, "model_zoo", "*", "model.yaml"))):
        name = os.path.basename(os.path.dirname(path))
        with open(path) as f:
            text = f.read()
        weights = glob.glob(os.path.join(os.path.dirname(path), "*.safetensors"))
        yield "zoo/" + name, text, load_file(weights[0]), []
    for name, text, weights, pairs in keras_fixtures_reverse.fixtures():
        yield name, text, weights, pairs
    for path in sorted(glob.glob(os.path.join(HERE, "reverse", "*.yaml"))):
        with open(path) as f:
            yield "reverse/" + os.path.basename(path)[:-5], f.read(), None, []


def tfc(*args):
    r = subprocess.run([os.path.join(BIN, args[0])] + list(args[1:]), capture_output=True,
                       text=True)
    if r.returncode:
        raise RuntimeError("%s exited %d: %s" % (args[0], r.returncode,
                                                 (r.stderr or r.stdout).strip()[-2000:]))
    return r.stdout


def check_import(src, extra, out, model, expect, pairs, text):
    """tfc-import SRC into OUT; the weights and the outputs against Keras's. A model of
    variable length (Keras's None time axis) needs tfc's max_length, which Keras's file does
    not hold: as a user would, the model file is given (--model: the YAML itself)."""
    try:
        tfc("tfc-import", src, "--out", out, "--overwrite", *extra)
        model_yaml = os.path.join(out, "model.yaml")
    except RuntimeError as e:
        if "max_length" not in str(e):
            raise
        model_yaml = os.path.join(out, "given.yaml")
        with open(model_yaml, "w") as f:
            f.write(text)
        tfc("tfc-import", src, "--out", out, "--overwrite", "--model", model_yaml, *extra)
    got = load_file(os.path.join(out, "weights.safetensors"))
    if sorted(got) != sorted(expect):
        raise RuntimeError("names differ: only tfc's %s, only Keras's %s" % (
            sorted(set(got) - set(expect)), sorted(set(expect) - set(got))))
    for k in expect:
        if got[k].shape != expect[k].shape or not np.array_equal(got[k], expect[k]):
            raise RuntimeError("%s differs (shape %s, Keras's %s)" % (
                k, got[k].shape, expect[k].shape))
    summary = json.loads(tfc("tfc-summary", model_yaml, "--json"))
    total = summary["params"]
    if total != model.count_params():
        raise RuntimeError("tfc counts %s parameters, Keras %d" % (total, model.count_params()))
    worst = 0.0
    for i, (x, y) in enumerate(pairs):
        xp, yp = os.path.join(out, "x%d.npy" % i), os.path.join(out, "y%d.npy" % i)
        np.save(xp, x)
        tfc("tfc-predict", model_yaml, "--weights",
            os.path.join(out, "weights.safetensors"), "--input", xp, "--output", yp)
        t = np.load(yp).reshape(y.shape)
        worst = max(worst, float(np.max(np.abs(t - y)) / max(float(np.max(np.abs(y))), 1e-30)))
    if worst > TOLERANCE:
        raise RuntimeError("outputs differ from Keras's by %.3g of the largest" % worst)
    return worst


def main():
    only = sys.argv[1:]
    failed, skipped, seen = [], [], 0
    for name, text, weights, pairs in models():
        if only and name not in only:
            continue
        seen += 1
        keras.utils.clear_session()
        try:
            model = keras_from_yaml.build_text(text)
            if weights is not None:
                keras_from_yaml.load_weights(model, None, weights)
        except Exception as e:  # noqa: BLE001 - keras_from_yaml's own gaps, ref-zoo's concern
            skipped.append(name)
            print("%-40s skipped: Keras does not build it from the YAML (%s)" % (
                name, str(e).splitlines()[0][:90]))
            continue
        try:
            expect = {keras_from_yaml.tfc_name(v.path): np.asarray(v, dtype=np.float32)
                      for v in model.weights}
            with tempfile.TemporaryDirectory() as tmp:
                ways = []
                model.save(os.path.join(tmp, "m.keras"))
                ways.append(("keras", os.path.join(tmp, "m.keras"), []))
                with open(os.path.join(tmp, "m.json"), "w") as f:
                    f.write(model.to_json())
                model.save_weights(os.path.join(tmp, "m.weights.h5"))
                ways.append(("json", os.path.join(tmp, "m.json"),
                             ["--weights", os.path.join(tmp, "m.weights.h5")]))
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model.save(os.path.join(tmp, "m.h5"))
                    ways.append(("h5", os.path.join(tmp, "m.h5"), []))
                except Exception as e:  # noqa: BLE001 - Keras refuses some layers
                    print("  %s: no legacy .h5 (%s)" % (name, str(e).splitlines()[0][:100]))
                for way, src, extra in ways:
                    worst = check_import(src, extra, os.path.join(tmp, "out_" + way), model,
                                         expect, pairs, text)
                    print("%-40s %-5s %3d tensors ok%s" % (
                        name, way, len(expect), "; outputs within %.2g" % worst if pairs else ""))
        except Exception as e:  # noqa: BLE001 - report every model, then fail
            failed.append(name)
            print("%-40s FAILED: %s" % (name, e))
    print("%d models, %d skipped, %d failed%s" % (
        seen, len(skipped), len(failed), (": " + ", ".join(failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
