#!/usr/bin/env python3
"""Checks an ONNX file tfc-export wrote: onnx.checker.check_model(full_check=True), then runs
it on onnxruntime's CPU provider with X.npy and compares with tfc-predict's Y.npy elementwise:
|onnx - tfc| <= RTOL |tfc| + RTOL / 10 max|tfc| (RTOL 1e-5). The second term is for outputs
that are sums cancelling to near zero (logits of a Dense without softmax), where the two
runtimes' different summation orders leave differences of the size of the large terms'
rounding, not of the result's. Prints the largest differences; exit 0 when within, 1
otherwise (tests/test_onnx.c and tests/test_multi_input.c run it).
Usage: onnx_check.py MODEL.onnx X.npy|NAME=X.npy,NAME=X.npy,... Y.npy [RTOL]
(the second form: a model of several inputs, one array per graph input)"""
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
    want = np.load(ypath)
    got = sess.run(["output"], feeds)[0]
    if got.shape != want.shape:
        print(f"shape {got.shape}, tfc-predict {want.shape}")
        return 1
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    rel = diff / np.maximum(np.abs(want.astype(np.float64)), 1e-30)
    scale = float(np.abs(want).max())
    ok = bool(np.all(diff <= rtol * np.abs(want) + rtol / 10 * scale))
    big = np.abs(want) > 1e-3 * scale
    print(f"max abs diff {diff.max():.3g} (max |output| {scale:.3g}), max rel diff where "
          f"|output| > 1e-3 max {rel[big].max() if np.any(big) else 0:.3g}: "
          f"{'ok' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
