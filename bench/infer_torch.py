#!/usr/bin/env python3
"""PyTorch's side of make bench-infer: the ONNX file tfc-export wrote, converted to a PyTorch
module by onnx2torch (the same graph: channels-last input transposed inside), run under
torch.inference_mode with the given intra-op threads, eagerly (MODE eager) or compiled by
torch.compile (MODE compile: TorchInductor's C++ kernels, shapes static, so each batch size is
compiled for itself in its warm-up call, which is not timed); images per second at each batch
size and at batch 1 the latency of single calls (p50, p99), measured as bench/bench_infer.c
measures tfc: random pixels in [0, 1), one warm-up call per batch size, then calls for SECONDS.
Usage: infer_torch.py MODEL.onnx SECONDS THREADS eager|compile BATCH..."""
import sys
import time

import onnx
import torch
from onnx2torch import convert


def main():
    path, seconds, threads, mode = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if mode not in ("eager", "compile"):
        sys.exit(f"infer_torch.py: MODE is '{mode}'; expected eager or compile")
    torch.set_num_threads(threads)
    # the version on stderr: infer.sh's medians read every stdout line as PEER batch B: ...
    print(f"PyTorch {torch.__version__.split('+')[0]}", file=sys.stderr)
    graph = onnx.load(path)
    dims = graph.graph.input[0].type.tensor_type.shape.dim[1:]
    shape = [d.dim_value for d in dims]
    model = convert(graph).eval()
    if mode == "compile":
        model = torch.compile(model, dynamic=False)
    gen = torch.Generator().manual_seed(1)
    with torch.inference_mode():
        for b in map(int, sys.argv[5:]):
            x = torch.rand([b] + shape, generator=gen)
            model(x)  # compiles, in compile mode
            lat, start = [], time.perf_counter()
            now = start
            while now - start < seconds or len(lat) < 3:
                t0 = time.perf_counter()
                model(x)
                now = time.perf_counter()
                lat.append(now - t0)
            lat.sort()
            line = f"pytorch batch {b:5d}: {len(lat) * b / (now - start):9.1f} images/s"
            if b == 1:
                line += (f"  latency p50 {lat[len(lat) // 2] * 1e3:.3f} ms "
                         f"p99 {lat[int(0.99 * (len(lat) - 1))] * 1e3:.3f} ms")
            print(line + f"  ({len(lat)} calls)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
