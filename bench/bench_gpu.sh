#!/bin/sh
# `make bench-gpu`: tfc's training step on the GPU against PyTorch eager on the same GPU,
# same run, for mnist_mlp, mnist_cnn, char_lstm and resnet20 (batch 128; 32 for the LSTM).
# Two settings, both sides alike: strict float32 (TF32 off everywhere) and TF32 allowed in
# GEMMs and convolutions. Prints the JSON lines, then a table of medians, the speed-up of
# tfc over PyTorch and the peak GPU memory each holds (tfc: its caching allocator's peak;
# PyTorch: torch.cuda.max_memory_reserved). STEPS=N shortens the runs.
set -e
bin=${1:?usage: bench_gpu.sh BENCH_BINARY}
out=${BENCH_OUT:-build/bench-gpu}
steps=${STEPS:-150}
mkdir -p "$out"
names="mnist_mlp mnist_cnn char_lstm resnet20"
models=""
for n in $names; do models="$models bench/models/$n.yaml"; done
if ! "$bin" --device gpu --steps 1 --repeats 1 bench/models/mnist_mlp.yaml >/dev/null 2>"$out/probe.err"; then
    echo "bench-gpu: no usable GPU ($(cat "$out/probe.err"))"
    exit 1
fi
"$bin" --device gpu --steps "$steps" $models | tee "$out/tfc_fp32.jsonl"
"$bin" --device gpu --steps "$steps" --tf32 $models | tee "$out/tfc_tf32.jsonl"
PY=${PYTHON:-python3}
for p in "$PY" /usr/bin/python3 python3; do
    if $p -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
        PY=$p; break
    fi
done
torch_models=$(echo $names | tr ' ' ',')
if $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    $PY bench/torch_bench.py --device cuda --steps "$steps" --models "$torch_models" \
        | tee "$out/torch_fp32.jsonl"
    $PY bench/torch_bench.py --device cuda --steps "$steps" --tf32 --models "$torch_models" \
        | tee "$out/torch_tf32.jsonl"
else
    echo "PyTorch with CUDA not found (PYTHON=... to choose an interpreter): tfc numbers only"
    : > "$out/torch_fp32.jsonl"; : > "$out/torch_tf32.jsonl"
fi
python3 - "$out" <<'PYEOF'
import json, statistics, sys
out = sys.argv[1]
def load(name):
    rows = {}
    for line in open(f"{out}/{name}"):
        line = line.strip()
        if line.startswith("{"):
            d = json.loads(line)
            if "model" in d: rows[d["model"]] = d
    return rows
for mode in ("fp32", "tf32"):
    tfc, pt = load(f"tfc_{mode}.jsonl"), load(f"torch_{mode}.jsonl")
    gpu = next((r.get("gpu") for r in tfc.values() if r.get("gpu")), "?")
    print(f"\n{mode} on {gpu}")
    print(f"{'model':<11} {'tfc ms':>8} {'torch ms':>9} {'torch/tfc':>10} {'tfc MiB':>8} {'torch MiB':>10}")
    for name, r in tfc.items():
        t = statistics.median(r["ms"])
        p = statistics.median(pt[name]["ms"]) if name in pt else float("nan")
        pm = pt[name]["peak_mib"] if name in pt else float("nan")
        print(f"{name:<11} {t:8.3f} {p:9.3f} {p / t:10.2f} {r['peak_mib']:8.1f} {pm:10.1f}")
print("\n(medians of 3 repeats; each step ends with a device sync on both sides; torch/tfc > 1 "
      "means tfc is faster; MiB: peak device memory held)")
PYEOF
