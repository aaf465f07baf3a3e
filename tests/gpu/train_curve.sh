#!/bin/sh
# Part of `make test-gpu`: fashion_cnn (configs/fashion_cnn.yaml) for 200 iterations on the
# GPU and on the CPU from the same seed; the displayed training losses (means of 10
# iterations) must agree within TOL (relative, default 0.05) at every display and the test
# accuracies within 0.02. Then the GPU run's iteration-100 snapshot is resumed on the CPU
# and the CPU's on the GPU: both must finish with losses within TOL of the uninterrupted
# runs. Also: deterministic: true gives identical weights twice, precision: bf16 is refused
# (until the GPU has its kernels), and a gpu_memory_limit
# below the model's needs, a GPU hidden by CUDA_VISIBLE_DEVICES and gpu:N past the last are
# clear errors. Skipped (exit 0) when the Fashion-MNIST package is not installed or no GPU is usable.
#   train_curve.sh BINDIR OUTDIR
set -eu
bin=${1:?usage: train_curve.sh BINDIR OUTDIR}
out=${2:?usage: train_curve.sh BINDIR OUTDIR}
tol=${TOL:-0.05}
data=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
if [ ! -r "$data" ]; then
    echo "train_curve: skipped ($data missing: apt-get install dataset-fashion-mnist)"
    exit 0
fi
rm -rf "$out"; mkdir -p "$out"
train() { # NAME DEVICE [ARGS...]
    name=$1 dev=$2; shift 2
    "$bin/tfc-train" configs/fashion_cnn.yaml --device "$dev" --quiet --out "$out/$name" \
        --set max_iter=200 --set display=10 --set test_interval=200 \
        --set snapshot.interval=100 --set snapshot.keep=3 "$@" >"$out/$name.log" 2>&1 || {
        if grep -q ' 0 usable GPUs' "$out/$name.log"; then
            echo "train_curve: skipped (no usable GPU)"; exit 0
        fi
        echo "train_curve: $name failed:"; cat "$out/$name.log"; exit 1; }
    grep '^done' "$out/$name.log" | sed "s/^/  $name ($dev): /"
}
train gpu gpu
train cpu cpu
train gpu_then_cpu cpu --resume "$out/gpu/snapshots/fashion_cnn_iter_100.state"
train cpu_then_gpu gpu --resume "$out/cpu/snapshots/fashion_cnn_iter_100.state"
# compare two log.csv files: every (iter, phase) row both have
curve=0
python3 - "$out" "$tol" <<'PY' || curve=1
import csv, sys
out, tol = sys.argv[1], float(sys.argv[2])
def rows(name):
    return {(int(r["iter"]), r["phase"]): r for r in csv.DictReader(open(f"{out}/{name}/log.csv"))}
gpu, cpu = rows("gpu"), rows("cpu")
bad = 0
def check(what, a, b, key, rel, lim):
    global bad
    for k in sorted(set(a) & set(b)):
        x, y = float(a[k][key]), float(b[k][key])
        d = abs(x - y) / abs(y) if rel else abs(x - y)
        if d > lim or d != d:
            print(f"train_curve: {what} iter {k[0]} {k[1]} {key}: {x:.6g} vs {y:.6g} ({d:.3g} > {lim})")
            bad += 1
train = [k for k in cpu if k[1] == "train"]
worst = max(abs(float(gpu[k]["loss"]) - float(cpu[k]["loss"])) / float(cpu[k]["loss"]) for k in train)
print(f"  GPU vs CPU: {len(train)} displayed losses, largest relative difference {worst:.2e}")
check("gpu vs cpu", {k: gpu[k] for k in train}, {k: cpu[k] for k in train}, "loss", 1, tol)
check("gpu vs cpu", gpu, cpu, "accuracy", 0, 0.02)
for name, ref in (("gpu_then_cpu", gpu), ("cpu_then_gpu", cpu)):
    r = rows(name)
    last = max(k for k in r if k[1] == "train")
    x, y = float(r[last]["loss"]), float(ref[last]["loss"])
    print(f"  {name}: loss at {last[0]} {x:.6f} vs uninterrupted {y:.6f}")
    check(name, {last: r[last]}, {last: ref[last]}, "loss", 1, tol)
    t = (200, "test")
    if t in r: check(name, {t: r[t]}, {t: ref[t]}, "accuracy", 0, 0.02)
print("train_curve: " + ("FAILED" if bad else "passed"))
sys.exit(1 if bad else 0)
PY
# deterministic: true repeats bit for bit on the GPU (fashion_cnn_bn: BatchNormalization,
# dropout and convolutions whose fastest cuDNN algorithms are not deterministic)
for k in 1 2; do
    "$bin/tfc-train" configs/fashion_cnn_bn.yaml --device gpu --quiet --out "$out/det$k" \
        --set max_iter=60 --set deterministic=true >"$out/det$k.log" 2>&1 ||
        { echo "train_curve: deterministic run $k failed:"; cat "$out/det$k.log"; exit 1; }
done
if cmp -s "$out/det1/final.safetensors" "$out/det2/final.safetensors"; then
    echo "  deterministic: two GPU runs of fashion_cnn_bn gave identical weights"
else
    echo "train_curve: FAILED: deterministic GPU runs differ"; exit 1
fi
# gpu_memory_limit: a limit below the model's needs is a clear error (exit 1), not a crash,
# refused from tfc-summary's plan before any data is read (issue 16), naming both sizes
set +e
"$bin/tfc-train" configs/fashion_cnn.yaml --device gpu --quiet --out "$out/limit" \
    --set max_iter=1 --set gpu_memory_limit=4 >"$out/limit.log" 2>&1
rc=$?
set -e
if [ $rc = 1 ] && grep -q 'needs .* MiB on .*MiB are available (left under gpu_memory_limit)' "$out/limit.log"; then
    echo "  gpu_memory_limit=4 (MiB): $(grep -m1 'needs' "$out/limit.log")"
else
    echo "train_curve: FAILED: gpu_memory_limit=4 gave exit $rc:"; cat "$out/limit.log"; exit 1
fi
# precision: bf16 is refused on the GPU until its kernels have run there (exit 2, naming the
# key), before any step
set +e
"$bin/tfc-train" configs/fashion_cnn.yaml --device gpu --quiet --out "$out/bf16" \
    --set max_iter=1 --set precision=bf16 >"$out/bf16.log" 2>&1
rc=$?
set -e
if [ $rc = 2 ] && grep -q 'precision.*bf16 is not available on' "$out/bf16.log"; then
    echo "  precision=bf16: $(grep -m1 'not available' "$out/bf16.log")"
else
    echo "train_curve: FAILED: precision=bf16 on the GPU gave exit $rc:"
    cat "$out/bf16.log"; exit 1
fi
# device selection: CUDA_VISIBLE_DEVICES hides the GPUs; gpu:N past the last one; both exit 1
set +e
CUDA_VISIBLE_DEVICES= "$bin/tfc-train" configs/fashion_cnn.yaml --device gpu --quiet \
    --out "$out/hidden" --set max_iter=1 >"$out/hidden.log" 2>&1
rc1=$?
"$bin/tfc-train" configs/fashion_cnn.yaml --device gpu:64 --quiet --out "$out/gpu64" \
    --set max_iter=1 >"$out/gpu64.log" 2>&1
rc2=$?
set -e
if [ $rc1 = 1 ] && grep -q '0 usable GPUs found (CUDA_VISIBLE_DEVICES is set)' "$out/hidden.log" &&
   [ $rc2 = 1 ] && grep -q 'device gpu:64 requested but' "$out/gpu64.log"; then
    echo "  CUDA_VISIBLE_DEVICES='': $(cat "$out/hidden.log")"
    echo "  --device gpu:64: $(cat "$out/gpu64.log")"
else
    echo "train_curve: FAILED: device selection (exits $rc1, $rc2):"
    cat "$out/hidden.log" "$out/gpu64.log"
    exit 1
fi
exit $curve
