#!/bin/sh
# `make bench-peers` (not in CI): tfc's CPU training step next to the frameworks a user would
# pick instead, same networks, batch and 2 threads, in one run of interleaved rounds. The
# peers live in virtual environments under build/peers/ (git-ignored), installed from PyPI
# on first use: torch (eager and torch.compile), tensorflow-cpu + keras (Keras 3 on
# TensorFlow), jax + keras (Keras 3 on JAX, XLA). A peer whose install fails is left out and
# said so. Prints each model's median ms per peer, the fastest peer / tfc, and tfc / the
# sgemm-rate bound.   bench/peers.sh BENCH_BINARY   (ROUNDS=3 STEPS=30 PEERS="torch tf jax")
set -e
bin=${1:?usage: peers.sh BENCH_BINARY}
out=${BENCH_OUT:-build/bench}/peers
venvs=build/peers
rounds=${ROUNDS:-3}
steps=${STEPS:-30}
peers=${PEERS:-"torch tf jax"}
names=mnist_mlp,mnist_cnn,char_lstm,resnet20
models="bench/models/mnist_mlp.yaml bench/models/mnist_cnn.yaml bench/models/char_lstm.yaml bench/models/resnet20.yaml"
clean="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2"
mkdir -p "$out" "$venvs"

# venv NAME PACKAGES...: creates build/peers/NAME with the packages, once
venv() {
    name=$1
    shift
    [ -x "$venvs/$name/bin/python" ] && [ -f "$venvs/$name/.installed" ] && return 0
    echo "installing $* into $venvs/$name (once; several GB for torch)"
    python3 -m venv "$venvs/$name" && "$venvs/$name/bin/pip" install -q "$@" numpy &&
        touch "$venvs/$name/.installed"
}
ok=
for p in $peers; do
    case $p in
    torch) venv torch torch && ok="$ok torch" || echo "torch: install failed, left out" ;;
    tf) venv tf tensorflow-cpu keras && ok="$ok tf" || echo "tensorflow: install failed, left out" ;;
    jax) venv jax jax keras && ok="$ok jax" || echo "jax: install failed, left out" ;;
    esac
done

: > "$out/all.jsonl"
r=0
while [ "$r" -lt "$rounds" ]; do
    r=$((r + 1))
    $clean "$bin" --threads 2 --steps "$steps" --repeats 1 $models | grep '"model"' |
        sed 's/^{/{"peer": "tfc", /' | tee -a "$out/all.jsonl"
    for p in $ok; do
        case $p in
        torch)
            $clean "$venvs/torch/bin/python" bench/torch_bench.py 2 --steps "$steps" \
                --models $names | sed 's/^{/{"peer": "torch eager", /' | tee -a "$out/all.jsonl"
            $clean "$venvs/torch/bin/python" bench/torch_bench.py 2 --steps "$steps" --compile \
                --models $names 2>/dev/null | sed 's/^{/{"peer": "torch compile", /' |
                tee -a "$out/all.jsonl" || echo "torch.compile failed, left out"
            ;;
        tf)
            $clean KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=3 "$venvs/tf/bin/python" \
                bench/keras_bench.py 2 --steps "$steps" --models $names 2>/dev/null |
                grep '"model"' | tee -a "$out/all.jsonl"
            ;;
        jax)
            $clean KERAS_BACKEND=jax taskset -c 0,1 "$venvs/jax/bin/python" \
                bench/keras_bench.py 2 --steps "$steps" --models $names 2>/dev/null |
                grep '"model"' | tee -a "$out/all.jsonl"
            ;;
        esac
    done
done

python3 - "$out/all.jsonl" <<'PYEOF'
import json, statistics, sys
ms, bound, peers = {}, {}, []
for line in open(sys.argv[1]):
    d = json.loads(line)
    p = d["peer"]
    if p not in peers: peers.append(p)
    ms.setdefault(d["model"], {}).setdefault(p, []).extend(d["ms"])
    if "bound_ms" in d: bound.setdefault(d["model"], []).append(d["bound_ms"])
short = [p.replace("keras ", "k").replace(" tensorflow", " tf") for p in peers]
print("\n" + f"{'model':<10}" + "".join(f"{s:>16}" for s in short) +
      f"{'best peer/tfc':>15}{'tfc/bound':>10}")
for model, row in ms.items():
    med = {p: statistics.median(v) for p, v in row.items()}
    others = [v for p, v in med.items() if p != "tfc"]
    best = min(others) if others else float("nan")
    t = med.get("tfc", float("nan"))
    b = statistics.median(bound.get(model, [float("nan")]))
    print(f"{model:<10}" + "".join(f"{med.get(p, float('nan')):16.2f}" for p in peers) +
          f"{best / t:15.2f}{t / b:10.2f}")
print("(ms per training step: medians over rounds of each round's median; 2 threads; "
      "bound: GEMM FLOPs / sgemm rate)")
PYEOF
