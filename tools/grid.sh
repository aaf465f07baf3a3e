#!/bin/sh
# A hyperparameter sweep the way a Caffe user writes one: a plain loop over
# `tfc-train --set`, then each run's summary.json read back (python3, no jq needed).
#   tools/grid.sh [SOLVER.yaml] [OUT_DIR]      (TFC_BIN: where tfc-train is, default bin)
# tfc-grid does the same with parallel jobs, resuming and random search.
solver=${1:-configs/fashion_mlp.yaml}
out=${2:-runs/grid-sh}
bin=${TFC_BIN:-bin}
mkdir -p "$out"
for lr in 0.01 0.001 0.0001; do
    for bs in 64 128; do
        run=$out/lr=$lr,bs=$bs
        "$bin/tfc-train" "$solver" --quiet --out "$run" \
            --set optimizer.learning_rate=$lr \
            --set data.train.pipeline.3.batch.batch_size=$bs >"$run.log" 2>&1 ||
            echo "$run: exit $? (see $run.log)" >&2
    done
done
echo "learning_rate,batch_size,status,test_accuracy,best_accuracy,best_iter"
for s in "$out"/*/summary.json; do
    python3 - "$s" <<'PY'
import json, os, sys
s = json.load(open(sys.argv[1]))
name = os.path.basename(os.path.dirname(sys.argv[1]))        # lr=...,bs=...
lr, bs = (kv.split("=")[1] for kv in name.split(","))
test, best = s.get("final", {}).get("test", {}), s.get("best", {})
print(f"{lr},{bs},{s['status']},{test.get('accuracy')},{best.get('value')},{best.get('iteration')}")
PY
done | sort -t, -k5 -r
