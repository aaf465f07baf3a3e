#!/bin/sh
# `make bench-dist`: data-parallel training on the CPU — 2 ranks x 1 thread (`--nprocs 2`)
# against 1 process x 2 threads, same global batch (128), mnist_mlp and mnist_cnn on
# synthetic 28x28 data, through tfc-train end to end (pipeline, step, all-reduce). Medians of
# interleaved rounds (ROUNDS, ITERS); OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset. A ratio of 0.9
# or more means the reduction is nearly free when the ranks share a node.
set -e
bin=${1:-bin}
out=${BENCH_OUT:-build/bench/dist}
rounds=${ROUNDS:-3}
iters=${ITERS:-60}
mkdir -p "$out"
export OMPI_MCA_rmaps_base_oversubscribe=1
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
python3 - "$out" <<'PY'
import numpy as np, sys
r = np.random.default_rng(0)
np.save(sys.argv[1] + "/x.npy", r.random((4096, 28, 28, 1), dtype=np.float32))
np.save(sys.argv[1] + "/y.npy", r.integers(0, 10, 4096).astype(np.int32))
PY
for m in mnist_mlp mnist_cnn; do
    shape="[28, 28, 1]"
    cat > "$out/$m.solver.yaml" <<YAML
model: $(pwd)/bench/models/$m.yaml
data:
  train:
    source: {type: npy, features: x.npy, labels: y.npy}
    pipeline:
      - repeat: {}
      - batch: {batch_size: 128}
optimizer: {type: sgd, learning_rate: 0.01}
max_iter: $iters
display: 0
YAML
    [ $m = mnist_mlp ] && sed -i 's|      - repeat: {}|      - map: {op: reshape, shape: [784]}\n      - repeat: {}|' "$out/$m.solver.yaml"
done
clean="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
: > "$out/runs.txt"
for round in $(seq "$rounds"); do
    for m in mnist_mlp mnist_cnn; do
        rm -rf "$out/one" "$out/two"
        $clean "$bin/tfc-train" "$out/$m.solver.yaml" --device cpu --threads 2 --out "$out/one" --quiet >/dev/null
        $clean "$bin/tfc-train" "$out/$m.solver.yaml" --device cpu --threads 1 --nprocs 2 --out "$out/two" --quiet >/dev/null
        echo "$m $(python3 -c "import json;print(json.load(open('$out/one/summary.json'))['iterations_per_second'])") $(python3 -c "import json;print(json.load(open('$out/two/summary.json'))['iterations_per_second'])")" >> "$out/runs.txt"
    done
done
python3 - "$out/runs.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m, a, b = line.split()
    rows.setdefault(m, []).append((float(a), float(b)))
print(f"{'model':12} {'1 proc x 2 thr it/s':>20} {'2 ranks x 1 thr it/s':>21} {'ratio':>6}")
for m, v in rows.items():
    a = statistics.median(x for x, _ in v); b = statistics.median(y for _, y in v)
    print(f"{m:12} {a:20.1f} {b:21.1f} {b / a:6.2f}")
PY
