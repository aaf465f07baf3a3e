#!/usr/bin/env python3
"""PyTorch's side of make bench-infer: the ONNX file tfc-export wrote, converted to a PyTorch
module by onnx2torch (the same graph: channels-last input transposed inside; ONNX's LSTM and GRU,
which onnx2torch lacks, become torch.nn.LSTM and torch.nn.GRU holding the file's weights, and
GlobalMaxPool an amax, below),
run under torch.inference_mode with the given intra-op threads, eagerly (MODE eager) or compiled
by torch.compile (MODE compile: TorchInductor's C++ kernels, shapes static, so each batch size is
compiled for itself in its warm-up call, which is not timed); images per second at each batch
size and at batch 1 the latency of single calls (p50, p99), measured as bench/bench_infer.c
measures tfc: random pixels in [0, 1) (token ids in [1, 20) for an int32 input), one warm-up call
per batch size, then calls for SECONDS. Where onnxruntime is importable the converted module's
outputs on three random examples are first compared with onnxruntime's on the same file, and a
relative difference over 1e-4 stops the run (a wrong conversion is not timed).
Usage: infer_torch.py MODEL.onnx SECONDS THREADS eager|compile BATCH..."""
import sys
import time

import numpy as np
import onnx
import torch
from onnx2torch import convert
from onnx2torch.node_converters.registry import add_converter
from onnx2torch.utils.common import OnnxMapping, OperationConverterResult
from torch import nn

# ONNX's gate blocks (LSTM: i o f c; GRU: z r h) in torch's order (LSTM: i f g o; GRU: r z n)
GATES = {"LSTM": [0, 2, 3, 1], "GRU": [1, 0, 2]}


class OnnxRecurrence(nn.Module):
    """ONNX's LSTM or GRU (layout 0, forward or bidirectional, no peepholes, default
    activations; a GRU with linear_before_reset = 1, torch's formula) as torch's own layer; the
    file's sequence_lens pack the batch when any sequence is shorter than the input."""

    def __init__(self, kind, w, r, b, hidden, bidirectional, outputs):
        super().__init__()
        self.outputs = outputs
        layer = nn.LSTM if kind == "LSTM" else nn.GRU
        self.rnn = layer(w.shape[2], hidden, bidirectional=bidirectional)
        order = GATES[kind]

        def gates(m):  # [gates * hidden, ...] in torch's gate order
            return torch.cat([m[g * hidden:(g + 1) * hidden] for g in order])

        n = len(order) * hidden
        with torch.no_grad():
            for d, suffix in enumerate(["", "_reverse"][: w.shape[0]]):
                getattr(self.rnn, "weight_ih_l0" + suffix).copy_(gates(w[d]))
                getattr(self.rnn, "weight_hh_l0" + suffix).copy_(gates(r[d]))
                bias = b[d] if b is not None else torch.zeros(2 * n)
                getattr(self.rnn, "bias_ih_l0" + suffix).copy_(gates(bias[:n]))
                getattr(self.rnn, "bias_hh_l0" + suffix).copy_(gates(bias[n:]))

    def forward(self, x, lens=None):  # x [T, B, C]
        steps, batch = x.shape[0], x.shape[1]
        if lens is not None and bool((lens < steps).any()):
            packed = nn.utils.rnn.pack_padded_sequence(
                x, lens.to("cpu", torch.int64).clamp(min=1), enforce_sorted=False)
            y, state = self.rnn(packed)
            y, _ = nn.utils.rnn.pad_packed_sequence(y, total_length=steps)
        else:
            y, state = self.rnn(x)
        dirs = 2 if self.rnn.bidirectional else 1
        y = y.view(steps, batch, dirs, -1).permute(0, 2, 1, 3)  # ONNX's Y: [T, dirs, B, H]
        h = state[0] if isinstance(state, tuple) else state
        out = [y, h] + ([state[1]] if isinstance(state, tuple) else [])
        return tuple(out[: self.outputs]) if self.outputs > 1 else out[0]


def recurrence(node, graph):
    kind = node.operation_type
    a = node.attributes
    direction = a.get("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    unsupported = [k for k in ("activations", "clip", "input_forget") if k in a]
    if direction == "reverse" or a.get("layout", 0) != 0 or unsupported or (
            kind == "GRU" and a.get("linear_before_reset", 0) != 1):
        raise NotImplementedError(f"{kind} with {direction}, layout {a.get('layout', 0)}, "
                                  f"{unsupported}, linear_before_reset "
                                  f"{a.get('linear_before_reset', 0)}: no converter here")
    ins = list(node.input_values) + [""] * 8
    if any(ins[5:8]):
        raise NotImplementedError(f"{kind} with initial states or peepholes: no converter here")
    init = graph.initializers

    def weight(name):
        return init[name].to_torch() if name else None

    outs = [o for o in node.output_values]
    while outs and not outs[-1]:
        outs.pop()
    module = OnnxRecurrence(kind, weight(ins[1]), weight(ins[2]), weight(ins[3]),
                            a["hidden_size"], direction == "bidirectional", len(outs))
    inputs = (ins[0], ins[4]) if ins[4] else (ins[0],)
    return OperationConverterResult(torch_module=module,
                                    onnx_mapping=OnnxMapping(inputs=inputs, outputs=tuple(outs)))


class GlobalMaxPool(nn.Module):
    def forward(self, x):  # [B, C, spatial...] -> [B, C, 1...]
        return torch.amax(x, dim=tuple(range(2, x.dim())), keepdim=True)


add_converter(operation_type="GlobalMaxPool", version=1)(
    lambda node, graph: OperationConverterResult(
        torch_module=GlobalMaxPool(),
        onnx_mapping=OnnxMapping(inputs=tuple(node.input_values), outputs=tuple(node.output_values))))
for op in ("LSTM", "GRU"):
    for version in (7, 14, 22):
        add_converter(operation_type=op, version=version)(recurrence)


def example(inp, b, gen):
    shape = [b] + [d.dim_value for d in inp.type.tensor_type.shape.dim[1:]]
    if inp.type.tensor_type.elem_type == onnx.TensorProto.INT32:
        return torch.randint(1, 20, shape, generator=gen, dtype=torch.int32)
    return torch.rand(shape, generator=gen)


def check(path, model, graph, gen):
    try:
        import onnxruntime
    except ImportError:
        print("infer_torch.py: no onnxruntime in this venv: conversion not checked", file=sys.stderr)
        return
    x = example(graph.graph.input[0], 3, gen)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    with torch.inference_mode():
        got = model(x)
    got = (got[0] if isinstance(got, (tuple, list)) else got).numpy()
    diff = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    if got.shape != want.shape or not diff <= 1e-4:
        sys.exit(f"infer_torch.py: {path}: the converted module's outputs differ from "
                 f"onnxruntime's (shape {got.shape} against {want.shape}, relative {diff:.3g})")


def main():
    if len(sys.argv) < 6:
        sys.exit("usage: infer_torch.py MODEL.onnx SECONDS THREADS eager|compile BATCH...")
    path, seconds, threads, mode = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if mode not in ("eager", "compile"):
        sys.exit(f"infer_torch.py: MODE is '{mode}'; expected eager or compile")
    torch.set_num_threads(threads)
    # the version on stderr: infer.sh's medians read every stdout line as PEER batch B: ...
    print(f"PyTorch {torch.__version__.split('+')[0]}", file=sys.stderr)
    graph = onnx.load(path)
    model = convert(graph).eval()
    gen = torch.Generator().manual_seed(1)
    check(path, model, graph, gen)
    if mode == "compile":
        model = torch.compile(model, dynamic=False)
    with torch.inference_mode():
        for b in map(int, sys.argv[5:]):
            x = example(graph.graph.input[0], b, gen)
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
