#!/usr/bin/env python3
"""Checks an ONNX file tfc-export wrote: onnx.checker.check_model(full_check=True), then runs
it on onnxruntime's CPU provider with X.npy and compares with tfc-predict's Y.npy elementwise:
|onnx - tfc| <= RTOL |tfc| + RTOL / 10 max|tfc| (RTOL 1e-5). The second term is for outputs
that are sums cancelling to near zero (logits of a Dense without softmax), where the two
runtimes' different summation orders leave differences of the size of the large terms'
rounding, not of the result's. Prints the largest differences; exit 0 when within, 1
otherwise (tests/test_onnx.c, tests/test_multi_input.c and tests/test_multi_output.c run it).
Usage: onnx_check.py MODEL.onnx X.npy|NAME=X.npy,NAME=X.npy,... Y.npy|NAME=Y.npy,... [RTOL]
(the second forms: a model of several inputs, one array per graph input; of several outputs,
one array per graph output, each compared)"""
import sys

import numpy as np
import onnx
import onnxruntime as ort


def main():
    path, xpath, ypath = sys.argv[1:4]
    rtol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-5
    onnx.checker.check_model(onnx.load(path), full_check=True)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    if "=" in xpath:
        feeds = {k: np.load(v) for k, v in (f.split("=", 1) for f in xpath.split(","))}
    else:
        feeds = {"input": np.load(xpath)}
    if "=" in ypath:
        wants = [(k, np.load(v)) for k, v in (f.split("=", 1) for f in ypath.split(","))]
    else:
        wants = [("output", np.load(ypath))]
    names = [o.name for o in sess.get_outputs()]
    if names != [k for k, _ in wants]:
        print(f"graph outputs {names}, expected {[k for k, _ in wants]}")
        return 1
    gots = sess.run(names, feeds)
    bad = 0
    for (name, want), got in zip(wants, gots):
        if got.shape != want.shape:
            print(f"{name}: shape {got.shape}, tfc-predict {want.shape}")
            return 1
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        rel = diff / np.maximum(np.abs(want.astype(np.float64)), 1e-30)
        scale = float(np.abs(want).max())
        ok = bool(np.all(diff <= rtol * np.abs(want) + rtol / 10 * scale))
        big = np.abs(want) > 1e-3 * scale
        print(f"{name + ': ' if len(wants) > 1 else ''}max abs diff {diff.max():.3g} (max "
              f"|output| {scale:.3g}), max rel diff where |output| > 1e-3 max "
              f"{rel[big].max() if np.any(big) else 0:.3g}: {'ok' if ok else 'MISMATCH'}")
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
