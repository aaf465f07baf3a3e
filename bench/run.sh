#!/bin/sh
# `make bench`: tfc's training step against PyTorch eager on the same networks, same 2
# threads, same run. OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE are unset for both (a user's
# machine has no such preset). PyTorch gets its fastest set-up: 2 intra-op threads, and the
# better of glibc's default malloc and a malloc tuned to keep its memory (no trimming, no
# mmap for large blocks). Prints the JSON lines, then a table of medians and ratios.
set -e
bin=${1:?usage: run.sh BENCH_BINARY}
out=${BENCH_OUT:-build/bench}
mkdir -p "$out"
models="bench/models/mnist_mlp.yaml bench/models/mnist_cnn.yaml bench/models/char_lstm.yaml"
clean="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2"
$clean "$bin" $models | tee "$out/tfc.jsonl"
PY=${PYTHON:-python3}
for p in /usr/bin/python3 python3; do
    if $p -c "import torch" 2>/dev/null; then PY=$p; break; fi
done
if $PY -c "import torch" 2>/dev/null; then
    $clean $PY bench/torch_bench.py 2 | tee "$out/torch_default.jsonl"
    $clean MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TOP_PAD_=268435456 \
        $PY bench/torch_bench.py 2 | tee "$out/torch_tuned.jsonl"
else
    echo "PyTorch not found (apt-get install python3-torch): tfc numbers only"
    : > "$out/torch_default.jsonl"; : > "$out/torch_tuned.jsonl"
fi
$PY - "$out" <<'PYEOF'
import json, statistics, sys
out = sys.argv[1]
def load(name):
    rows = {}
    for line in open(f"{out}/{name}"):
        d = json.loads(line)
        if "model" in d: rows[d["model"]] = d
    return rows
tfc, td, tt = load("tfc.jsonl"), load("torch_default.jsonl"), load("torch_tuned.jsonl")
print(f"\n{'model':<11} {'tfc ms':>8} {'torch ms':>9} {'torch/tfc':>10} {'bound ms':>9} {'tfc/bound':>10}")
for name, r in tfc.items():
    t = statistics.median(r["ms"])
    cands = [statistics.median(d[name]["ms"]) for d in (td, tt) if name in d]
    p = min(cands) if cands else float("nan")
    print(f"{name:<11} {t:8.2f} {p:9.2f} {p / t:10.2f} {r['bound_ms']:9.2f} {t / r['bound_ms']:10.2f}")
print("(medians of 3 repeats x 150 steps; torch: best of default and tuned malloc; "
      "bound: GEMM FLOPs / measured sgemm rate)")
PYEOF
