#!/bin/sh
# Part of `make test-gpu`: the engines of data-parallel GPU runs on one GPU (docs/distributed.md).
# A small MLP on synthetic data (numpy), 40 Adam steps of a global batch of 32:
#   1. TFC_COMM=nccl with one rank (an NCCL communicator of one, the all-reduce on the device)
#      ends with the weights of the plain one-process run (self) within 1e-6 relative;
#   2. two ranks sharing the GPU through the mpi engine (host staging; mpirun -np 2) end with
#      the one-process weights within 1e-5 relative.
# Skipped (exit 0) without a usable GPU; case 1 without NCCL in the build, case 2 without mpirun.
# DEVICE=cpu checks the harness itself on the CPU (case 2 only).
#   dist.sh BINDIR OUTDIR
set -eu
bin=${1:?usage: dist.sh BINDIR OUTDIR}
out=${2:?usage: dist.sh BINDIR OUTDIR}
device=${DEVICE:-gpu}
rm -rf "$out"; mkdir -p "$out"
python3 "$(dirname "$0")/../util/write_split.py" "$out"
cat >"$out/solver.yaml" <<'YAML'
model:
  name: dist_mlp
  input: {shape: [16]}
  layers:
    - Dense: {units: 64, activation: relu}
    - Dense: {units: 4, activation: softmax}
data:
  train:
    source: {type: npy, features: x.npy, labels: y.npy}
    pipeline: [{shuffle: {buffer_size: 512}}, {repeat: {}}, {batch: {batch_size: 32}}]
optimizer: {type: adam, learning_rate: 0.01}
max_iter: 40
seed: 3
YAML
run() { # NAME [ENV...] -- launcher words come first through $launch
    name=$1; shift
    if ! env "$@" $launch "$bin/tfc-train" "$out/solver.yaml" --device "$device" --quiet \
            --out "$out/$name" >"$out/$name.log" 2>&1; then
        if grep -q ' 0 usable GPUs' "$out/$name.log"; then
            echo "dist: skipped (no usable GPU)"; exit 0
        fi
        echo "dist: $name failed:"; cat "$out/$name.log"; exit 1
    fi
    grep '^done' "$out/$name.log" | sed "s/^/  $name: /" || true
}
same() { # A B TOL
    python3 - "$out/$1/final.safetensors" "$out/$2/final.safetensors" "$3" <<'PY'
import sys
from safetensors.numpy import load_file
a, b, tol = load_file(sys.argv[1]), load_file(sys.argv[2]), float(sys.argv[3])
worst = max(float(abs(a[k] - b[k]).max() / (abs(b[k]).max() + 1e-30)) for k in a)
print(f"  {sys.argv[1].split('/')[-2]} vs {sys.argv[2].split('/')[-2]}: max rel diff {worst:.2e} (tol {tol:g})")
sys.exit(worst > tol)
PY
}
launch=""
run self TFC_COMM=auto
status=0
if [ "${HAVE_NCCL:-0}" = 1 ] && [ "$device" = gpu ]; then # make test-gpu passes the build's
    run nccl1 TFC_COMM=nccl
    same nccl1 self 1e-6 || status=1
else
    echo "dist: case 1 skipped (this build has no NCCL)"
fi
if command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        OMPI_MCA_rmaps_base_oversubscribe=1
    launch="mpirun -np 2"
    run mpi2 TFC_COMM=mpi
    same mpi2 self 1e-5 || status=1
else
    echo "dist: case 2 skipped (no mpirun)"
fi
exit $status
