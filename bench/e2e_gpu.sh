#!/bin/sh
# Issue 41's end-to-end target on a GPU: `tfc-train configs/fashion_resnet.yaml` against the
# same schedule in PyTorch (bench/torch_train.py: the same network, data, augmentation,
# update, rate, weight average and test passes), wall seconds from start to exit and the test
# accuracy of each test pass. tfc runs as configured (its step a CUDA graph), and again with
# TFC_FLAGS when given (e.g. TFC_FLAGS=--no-cuda-graphs); the peer runs eager and under
# torch.compile in its default and reduce-overhead modes (PEER_MODES; `none`: tfc alone); both
# in each of PRECISIONS (fp32 strict, tf32, bf16; default fp32; tfc's bf16 is `precision:
# bf16`, which the GPU refuses until its kernel has landed there, docs/gpu.md). MAX_ITER=N
# shortens every run alike (the cosine then spans N iterations); DATA=DIR holds
# Fashion-MNIST's four .gz files.
#   e2e_gpu.sh BIN_DIR       (tools/gpu-bare.sh e2e runs it on a bare GPU machine)
set -e
bin=${1:?usage: e2e_gpu.sh BIN_DIR}
out=${BENCH_OUT:-build/bench-e2e}
data=${DATA:-/usr/share/datasets/fashion-mnist}
iters=${MAX_ITER:-14070}
PY=${PYTHON:-python3}
mkdir -p "$out"
: > "$out/e2e.jsonl"
tfc_run() { # NAME PRECISION FLAGS...
    name=$1 prec=$2
    shift 2
    t0=$(date +%s.%N)
    "$bin/tfc-train" configs/fashion_resnet.yaml --device gpu --out "$out/$name" --overwrite \
        --set "max_iter=$iters" \
        --set "data.train.source.images=$data/train-images-idx3-ubyte.gz" \
        --set "data.train.source.labels=$data/train-labels-idx1-ubyte.gz" \
        --set "data.test.source.images=$data/t10k-images-idx3-ubyte.gz" \
        --set "data.test.source.labels=$data/t10k-labels-idx1-ubyte.gz" \
        "$@" >"$out/$name.log" 2>&1 || { echo "$name: exit $? ($out/$name.log)"; return 0; }
    t1=$(date +%s.%N)
    $PY - "$out/$name" "$t0" "$t1" "$prec" "$*" >>"$out/e2e.jsonl" <<'PYEOF'
import csv, json, sys
run, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
prec, flags = sys.argv[4], sys.argv[5]
acc = []
with open(f"{run}/log.csv") as f:
    for row in csv.DictReader(f):
        if row.get("phase") == "test" and row.get("accuracy"):
            acc.append(float(row["accuracy"]))
s = json.load(open(f"{run}/summary.json"))
flags = " ".join(f for f in flags.split()
                 if not f.startswith(("precision=", "tf32=")) and f != "--set")
print(json.dumps({"peer": ("tfc " + flags).strip(), "precision": prec,
                  "iterations": s.get("iterations"), "seconds": round(t1 - t0, 3),
                  "test_accuracy": acc}))
PYEOF
    tail -1 "$out/e2e.jsonl"
}
for prec in $(echo "${PRECISIONS:-fp32}" | tr , " "); do
    case $prec in
        fp32) set -- ;;
        tf32) set -- --set tf32=true ;;
        bf16) set -- --set precision=bf16 ;;
        *) echo "e2e: PRECISIONS: '$prec' is none of fp32, tf32, bf16"; exit 1 ;;
    esac
    tfc_run "tfc_$prec" "$prec" "$@"
    [ -z "${TFC_FLAGS:-}" ] || tfc_run "tfc_flags_$prec" "$prec" "$@" $TFC_FLAGS
    for mode in ${PEER_MODES:-eager default reduce-overhead}; do
        [ "$mode" = none ] && continue
        flag=
        [ "$mode" = eager ] || flag="--compile $mode"
        $PY bench/torch_train.py --device cuda --precision "$prec" $flag --data "$data" \
            --max-iter "$iters" >>"$out/e2e.jsonl" 2>"$out/torch_${prec}_$mode.err" ||
            echo "torch $prec $mode: exit $? ($out/torch_${prec}_$mode.err)"
        tail -1 "$out/e2e.jsonl"
    done
done
$PY - "$out/e2e.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
tfc = [r for r in rows if r["peer"].startswith("tfc")]
best = {}
for r in rows:
    if not r["peer"].startswith("tfc"):
        p = r["precision"]
        best[p] = min(best.get(p, float("inf")), r["seconds"])
print(f"\n{'run':<34} {'precision':>9} {'seconds':>9} {'final accuracy':>15}")
for r in rows:
    acc = r["test_accuracy"][-1] if r["test_accuracy"] else float("nan")
    print(f"{r['peer']:<34} {r['precision']:>9} {r['seconds']:9.1f} {acc:15.4f}")
for r in tfc:
    p = r["precision"]
    if p in best:
        print(f"fastest peer in {p} / {r['peer']} in {p}: {best[p] / r['seconds']:.2f}")
print("(wall seconds from start to exit, data loading and test passes included; > 1: tfc "
      "is faster)")
PYEOF
