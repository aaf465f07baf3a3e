#!/bin/sh
# The cost of a gradient engine with one rank against none (issue 12: NCCL with one rank
# within 3% of the step): tfc-train on an MLP of 16 -> 1024 -> 1024 -> 4 (1.07 M parameters,
# a 4.3 MB gradient all-reduced every step) over the synthetic split of tests/util, with
# TFC_COMM=auto (one process: no engine) and TFC_COMM=$COMM, in interleaved rounds; prints
# each run's iterations per second (summary.json) and the median ratio. Part of
# `make bench-gpu` with COMM=nccl on the GPU; `DEVICE=cpu COMM=mpi` checks the harness on
# a machine without one.
#   comm_overhead.sh BINDIR OUTDIR
set -eu
bin=${1:?usage: comm_overhead.sh BINDIR OUTDIR}
out=${2:?usage: comm_overhead.sh BINDIR OUTDIR}
device=${DEVICE:-gpu} comm=${COMM:-nccl} iters=${ITERS:-300} rounds=${ROUNDS:-3}
rm -rf "$out"; mkdir -p "$out"
python3 "$(dirname "$0")/../tests/util/write_split.py" "$out"
cat >"$out/solver.yaml" <<YAML
model:
  name: comm_mlp
  input: {shape: [16]}
  layers:
    - Dense: {units: 1024, activation: relu}
    - Dense: {units: 1024, activation: relu}
    - Dense: {units: 4, activation: softmax}
data:
  train:
    source: {type: npy, features: x.npy, labels: y.npy}
    pipeline: [{shuffle: {buffer_size: 512}}, {repeat: {}}, {batch: {batch_size: 128}},
               {prefetch: {buffer_size: 2}}]
optimizer: {type: sgd, learning_rate: 0.01, momentum: 0.9}
max_iter: $iters
display: 0
snapshot: {interval: 0}
seed: 3
YAML
rate() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['iterations_per_second'])" "$1"; }
: >"$out/rates"
r=0
while [ $r -lt "$rounds" ]; do
    # the order alternates, so neither side always runs first
    if [ $((r % 2)) = 0 ]; then order="auto $comm"; else order="$comm auto"; fi
    for c in $order; do
        if ! TFC_COMM=$c "$bin/tfc-train" "$out/solver.yaml" --device "$device" --quiet \
                --out "$out/$c.$r" >"$out/$c.$r.log" 2>&1; then
            echo "comm_overhead: TFC_COMM=$c failed:"; cat "$out/$c.$r.log"; exit 1
        fi
        echo "$c $r $(rate "$out/$c.$r/summary.json")" | tee -a "$out/rates"
    done
    r=$((r + 1))
done
python3 - "$out/rates" "$comm" "$device" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
comm, device = sys.argv[2], sys.argv[3]
by = {}
for c, r, v in rows:
    by.setdefault(r, {})[c] = float(v)
ratios = [d["auto"] / d[comm] for d in by.values() if "auto" in d and comm in d]
auto = statistics.median(d["auto"] for d in by.values())
other = statistics.median(d[comm] for d in by.values())
print(f"\n{device}: no engine {auto:.1f} it/s, TFC_COMM={comm} (one rank) {other:.1f} it/s: "
      f"step time x{statistics.median(ratios):.3f} (median of {len(ratios)} interleaved rounds; "
      f"target for nccl on a GPU: <= 1.03)")
PY
