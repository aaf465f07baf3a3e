#!/usr/bin/env python3
"""onnxruntime's side of make bench-infer: images per second of MODEL.onnx (CPU provider) at
each batch size, and at batch 1 the latency of single runs (p50, p99), measured as
bench/bench_infer.c measures tfc: random pixels in [0, 1) (token ids in [1, 20) for an int32
input), one warm-up run per batch size, then runs for SECONDS. MODE `default` takes
SessionOptions() as they come (onnxruntime picks its threads); `best` sets intra_op_num_threads
to THREADS, one inter-op thread, sequential execution and graph optimisation level all. The
first line gives the session's creation time.
Usage: infer_ort.py MODEL.onnx SECONDS THREADS MODE BATCH..."""
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    path, seconds, threads, mode = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    opt = ort.SessionOptions()
    if mode == "best":
        opt.intra_op_num_threads = threads
        opt.inter_op_num_threads = 1
        opt.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opt.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    elif mode != "default":
        sys.exit(f"infer_ort.py: MODE is default or best, not {mode}")
    t0 = time.perf_counter()
    sess = ort.InferenceSession(path, opt, providers=["CPUExecutionProvider"])
    print(f"onnxruntime open {(time.perf_counter() - t0) * 1e3:.1f} ms", flush=True)
    inp = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape][1:]
    rng = np.random.default_rng(1)
    for b in map(int, sys.argv[5:]):
        if inp.type == "tensor(int32)":
            x = rng.integers(1, 20, [b] + shape, dtype=np.int32)
        else:
            x = rng.random([b] + shape, dtype=np.float32)
        sess.run(["output"], {"input": x})
        lat, start = [], time.perf_counter()
        now = start
        while now - start < seconds or len(lat) < 3:
            t0 = time.perf_counter()
            sess.run(["output"], {"input": x})
            now = time.perf_counter()
            lat.append(now - t0)
        lat.sort()
        line = f"onnxruntime batch {b:5d}: {len(lat) * b / (now - start):9.1f} images/s"
        if b == 1:
            line += (f"  latency p50 {lat[len(lat) // 2] * 1e3:.3f} ms "
                     f"p99 {lat[int(0.99 * (len(lat) - 1))] * 1e3:.3f} ms")
        print(line + f"  ({len(lat)} calls)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
