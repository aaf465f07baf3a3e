#!/bin/sh
# `make bench-gpu`: tfc's training step on the GPU against PyTorch eager on the same GPU,
# same run, for mnist_mlp, mnist_cnn, char_lstm and resnet20 (batch 128; 32 for the LSTM).
# Two settings, both sides alike: strict float32 (TF32 off everywhere) and TF32 allowed in
# GEMMs and convolutions. Prints the JSON lines, then a table of medians, the speed-up of
# tfc over PyTorch and the peak GPU memory each holds (tfc: its caching allocator's peak;
# PyTorch: torch.cuda.max_memory_reserved). Then the faster peers in strict float32 (issue
# 41): torch.compile in its default mode and in reduce-overhead (CUDA graphs), and one
# jax.jit per step (bench/jax_bench.py; left out with a line saying so where JAX has no GPU),
# PEER_STEPS steps each after 10 warm-up steps that hold the compilation, and a table of
# every peer with the fastest one's time over tfc's. STEPS=N shortens the runs. MODELS="..."
# (spaces or commas) replaces the four networks with any of bench/models/ that the peers'
# scripts also build, e.g. MODELS="gpt_t128 gpt_t512 gpt_t2048" for issue 40's GPT table.
# TFC_FLAGS="..." are tfc's bench_train flags: --graphs (the step replayed from a CUDA graph,
# as tfc-train runs it) unless set; TFC_FLAGS= times the launched step, TFC_FLAGS=--conv-find
# (without graphs) the measured convolution algorithms.
set -e
bin=${1:?usage: bench_gpu.sh BENCH_BINARY}
out=${BENCH_OUT:-build/bench-gpu}
steps=${STEPS:-150}
mkdir -p "$out"
names=$(echo "${MODELS:-mnist_mlp mnist_cnn char_lstm resnet20}" | tr , " ")
models=""
for n in $names; do models="$models bench/models/$n.yaml"; done
if ! "$bin" --device gpu --steps 1 --repeats 1 bench/models/mnist_mlp.yaml >/dev/null 2>"$out/probe.err"; then
    echo "bench-gpu: no usable GPU ($(cat "$out/probe.err"))"
    exit 1
fi
"$bin" --device gpu --steps "$steps" ${TFC_FLAGS---graphs} $models | tee "$out/tfc_fp32.jsonl"
"$bin" --device gpu --steps "$steps" --tf32 ${TFC_FLAGS---graphs} $models | tee "$out/tfc_tf32.jsonl"
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
peer_steps=${PEER_STEPS:-30}
# PEER_PRECISIONS: the settings the faster peers run in, from fp32 (strict), tf32 and bf16
# (torch.autocast / JAX casts, float32 weights; eager PyTorch joins them in bf16). tfc's
# bf16 is bench_train --bf16: precision bf16 on TF32 math, its rounding kernel put into the
# GPU's table for the run (not yet landed there: docs/gpu.md)
precisions=$(echo "${PEER_PRECISIONS:-fp32}" | tr , " ")
case " $precisions " in
    *" bf16 "*) "$bin" --device gpu --steps "$steps" --bf16 ${TFC_FLAGS---graphs} $models |
                    tee "$out/tfc_bf16.jsonl" ;;
esac
for prec in $precisions; do : > "$out/peers_$prec.jsonl"; done
peer() { # NAME COMMAND...: the JSON lines, tagged with the peer's name
    name=$1; shift
    "$@" | sed "s/^{/{\"peer\": \"$name\", /" | tee -a "$out/peers_$prec.jsonl"
}
have_torch=$($PY -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)
have_jax=$($PY -c "import jax; print(int(jax.default_backend() == 'gpu'))" 2>/dev/null || echo 0)
[ "$have_jax" = 1 ] || echo "bench-gpu: JAX with a GPU backend not found in $PY: JAX left out"
for prec in $precisions; do
    case $prec in
        fp32) flag= ;;
        tf32) flag=--tf32 ;;
        bf16) flag=--bf16 ;;
        *) echo "bench-gpu: PEER_PRECISIONS: '$prec' is none of fp32, tf32, bf16"; exit 1 ;;
    esac
    if [ "$have_torch" = 1 ]; then
        [ "$prec" = bf16 ] && peer eager $PY bench/torch_bench.py --device cuda \
            --steps "$peer_steps" --warmup 10 --repeats 1 $flag --models "$torch_models"
        for mode in default reduce-overhead; do
            peer "compile $mode" $PY bench/torch_bench.py --device cuda --steps "$peer_steps" \
                --warmup 10 --repeats 1 --compile $mode $flag --models "$torch_models"
        done
    fi
    [ "$have_jax" = 1 ] && peer jax $PY bench/jax_bench.py --steps "$peer_steps" --warmup 10 \
        --repeats 1 $flag --models "$torch_models"
done
python3 - "$out" $precisions <<'PYEOF'
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
for prec in sys.argv[2:]:
    peers = {}
    for line in open(f"{out}/peers_{prec}.jsonl"):
        if line.startswith("{"):
            d = json.loads(line)
            peers.setdefault(d["peer"], {})[d["model"]] = statistics.median(d["ms"])
    # tfc and eager of the first runs in fp32 and tf32; in bf16 tfc's own run, eager its own
    tfc = load(f"tfc_{prec}.jsonl")
    if prec != "bf16":
        for name, r in load(f"torch_{prec}.jsonl").items():
            peers.setdefault("eager", {})[name] = statistics.median(r["ms"])
    cols = (["eager"] if "eager" in peers else []) + sorted(c for c in peers if c != "eager")
    names = list(tfc) or list(dict.fromkeys(m for c in cols for m in peers[c]))
    print(f"\n{prec}, every peer (ms per step)")
    w = [max(8, len(c)) for c in cols]
    print(f"{'model':<11} {'tfc':>8}" + "".join(f" {c:>{k}}" for c, k in zip(cols, w)) +
          f" {'best peer/tfc':>14}")
    for name in names:
        t = statistics.median(tfc[name]["ms"]) if name in tfc else float("nan")
        ms = [peers.get(c, {}).get(name, float("nan")) for c in cols]
        best = min((m for m in ms if m == m), default=float("nan"))
        print(f"{name:<11} {t:8.3f}" + "".join(f" {m:{k}.3f}" for m, k in zip(ms, w)) +
              f" {best / t:14.2f}")
print("(best peer/tfc < 1: a peer is faster than tfc; nan: not run, or tfc has no such setting)")
PYEOF
