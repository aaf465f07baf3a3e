#!/bin/sh
# `make bench-load`: how tfc's CPU training step holds up when the machine is busy. For each
# model, in interleaved rounds: the step quiet on --threads 2, the same step while a one-core
# hog (`yes`, pinned to CPU 0 by taskset) runs beside it, and --threads 4 (more threads than
# this 2-core machine has cores, a user's mistake). Prints the JSON lines, then per model the
# median ms of each condition and the ratios to quiet (the issue's target: hog <= 2.5x).
# A second binary (BASE=path) runs the same rounds interleaved, for before/after ratios.
#   bench/load.sh BENCH_BINARY   (ROUNDS=5 STEPS=20 MODELS="bench/models/x.yaml ...")
set -e
bin=${1:?usage: load.sh BENCH_BINARY}
out=${BENCH_OUT:-build/bench}
mkdir -p "$out"
rounds=${ROUNDS:-5}
steps=${STEPS:-20}
models=${MODELS:-"bench/models/mnist_mlp.yaml bench/models/mnist_cnn.yaml bench/models/char_lstm.yaml bench/models/resnet20.yaml"}
clean="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
log="$out/load.jsonl"
: > "$log"
hog=
trap '[ -n "$hog" ] && kill $hog 2>/dev/null' EXIT
trap 'exit 130' INT TERM

# one measurement: LABEL BINARY THREADS MODEL -> one JSON line with the label added
one() {
    $clean OMP_NUM_THREADS=$3 "$2" --threads "$3" --steps "$steps" --repeats 1 "$4" |
        grep '"model"' | sed "s/^{/{\"cond\": \"$1\", /" | tee -a "$log"
}

r=0
while [ "$r" -lt "$rounds" ]; do
    r=$((r + 1))
    for m in $models; do
        for b in "$bin" ${BASE:+"$BASE"}; do
            tag=$([ "$b" = "$bin" ] && echo tfc || echo base)
            one "$tag quiet" "$b" 2 "$m"
            one "$tag threads4" "$b" 4 "$m"
            taskset -c 0 yes > /dev/null &
            hog=$!
            one "$tag hog" "$b" 2 "$m"
            kill $hog
            wait $hog 2>/dev/null || true
            hog=
        done
    done
done

python3 - "$log" <<'PYEOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    rows.setdefault((d["cond"].split()[0], d["model"]), {}).setdefault(d["cond"].split()[1], []).append(d["ms"][0])
print(f"\n{'binary':<6} {'model':<11} {'quiet ms':>9} {'hog ms':>9} {'hog/quiet':>10} {'thr4 ms':>9} {'thr4/quiet':>11}")
for (tag, model), c in rows.items():
    q, h, t4 = (statistics.median(c[k]) for k in ("quiet", "hog", "threads4"))
    print(f"{tag:<6} {model:<11} {q:9.2f} {h:9.2f} {h / q:10.2f} {t4:9.2f} {t4 / q:11.2f}")
print("(medians over rounds; each value is the median of STEPS steps; hog: `yes` pinned to CPU 0)")
PYEOF
