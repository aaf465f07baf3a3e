#!/bin/sh
# `make bench-peers` (not in CI): tfc's CPU training step next to the frameworks a user would
# pick instead, same networks, batch and 2 threads, in one run of interleaved rounds. The
# peers live in virtual environments under build/peers/ (git-ignored), installed from PyPI
# on first use: torch (eager and torch.compile), tensorflow-cpu + keras (Keras 3 on
# TensorFlow), jax + keras (Keras 3 on JAX, XLA). A peer whose install fails is left out and
# said so. Prints each model's median ms per peer, the fastest peer / tfc, and tfc / the
# sgemm-rate bound (per round, against the rate bench_train measured around that round's
# steps, then the median); then the loaded-machine row: each peer's step beside a one-core
# busy loop and its ratio to the quiet step (HOG_ROUNDS=0 leaves it out).
#   bench/peers.sh BENCH_BINARY   (ROUNDS=3 STEPS=30 HOG_ROUNDS=1 HOG_STEPS=10 PEERS="torch tf jax")
set -e
bin=${1:?usage: peers.sh BENCH_BINARY}
[ -x "$bin" ] || { echo "peers.sh: $bin is not built (make build/release/bench/bench_train)" >&2; exit 2; }
out=${BENCH_OUT:-build/bench}/peers
venvs=build/peers
rounds=${ROUNDS:-3}
steps=${STEPS:-30}
hog_rounds=${HOG_ROUNDS:-1}
hog_steps=${HOG_STEPS:-10}
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

tag() { sed "s/^{/{\"load\": \"$load\", /"; }
# round LOAD STEPS: every installed peer once, each line tagged with the load; tfc, like the
# peers' scripts, times 3 repeats of STEPS steps per round
round() {
    load=$1
    $clean "$bin" --threads 2 --steps "$2" --repeats 3 $models | grep '"model"' |
        sed 's/^{/{"peer": "tfc", /' | tag | tee -a "$out/all.jsonl"
    for p in $ok; do
        case $p in
        torch)
            $clean "$venvs/torch/bin/python" bench/torch_bench.py 2 --steps "$2" \
                --models $names | sed 's/^{/{"peer": "torch eager", /' | tag |
                tee -a "$out/all.jsonl"
            $clean "$venvs/torch/bin/python" bench/torch_bench.py 2 --steps "$2" --compile \
                --models $names 2>/dev/null | sed 's/^{/{"peer": "torch compile", /' | tag |
                tee -a "$out/all.jsonl" || echo "torch.compile failed, left out"
            ;;
        tf)
            $clean KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=3 "$venvs/tf/bin/python" \
                bench/keras_bench.py 2 --steps "$2" --models $names 2>/dev/null |
                grep '"model"' | tag | tee -a "$out/all.jsonl"
            ;;
        jax)
            $clean KERAS_BACKEND=jax taskset -c 0,1 "$venvs/jax/bin/python" \
                bench/keras_bench.py 2 --steps "$2" --models $names 2>/dev/null |
                grep '"model"' | tag | tee -a "$out/all.jsonl"
            ;;
        esac
    done
}

: > "$out/all.jsonl"
r=0
while [ "$r" -lt "$rounds" ]; do
    r=$((r + 1))
    round quiet "$steps"
done
# the loaded-machine row: the same beside a busy loop pinned to CPU 0 (a user's other work)
hog=
trap '[ -n "$hog" ] && kill $hog 2>/dev/null' EXIT
r=0
while [ "$r" -lt "$hog_rounds" ]; do
    r=$((r + 1))
    taskset -c 0 sh -c 'while :; do :; done' &
    hog=$!
    round hog "$hog_steps"
    kill $hog
    wait $hog 2>/dev/null || true
    hog=
done

python3 - "$out/all.jsonl" <<'PYEOF'
import json, statistics, sys
ms, bound, peers = {}, {}, []
for line in open(sys.argv[1]):
    d = json.loads(line)
    p, load = d["peer"], d.get("load", "quiet")
    if p not in peers: peers.append(p)
    ms.setdefault(load, {}).setdefault(d["model"], {}).setdefault(p, []).extend(d["ms"])
    if "bound_ms" in d and load == "quiet":  # this round's tfc / its own bound
        bound.setdefault(d["model"], []).append(statistics.median(d["ms"]) / d["bound_ms"])
short = [p.replace("keras ", "k").replace(" tensorflow", " tf") for p in peers]
nan = float("nan")
med = {load: {m: {p: statistics.median(v) for p, v in row.items()} for m, row in rows.items()}
       for load, rows in ms.items()}
print("\n" + f"{'model':<10}" + "".join(f"{s:>16}" for s in short) +
      f"{'best peer/tfc':>15}{'tfc/bound':>10}")
for model, row in med.get("quiet", {}).items():
    others = [v for p, v in row.items() if p != "tfc"]
    best = min(others) if others else nan
    t = row.get("tfc", nan)
    b = statistics.median(bound.get(model, [nan]))
    print(f"{model:<10}" + "".join(f"{row.get(p, nan):16.2f}" for p in peers) +
          f"{best / t:15.2f}{b:10.2f}")
print("(ms per training step: medians over every repeat of every round, each repeat a "
      "median of its steps; 2 threads; "
      "tfc/bound: median over rounds of the step / GEMM FLOPs per sgemm rate, the rate "
      "measured beside that round's steps)")
if "hog" in med:
    print("\nbeside a one-core busy loop: ms per step (x its quiet step)")
    for model, row in med["hog"].items():
        q = med.get("quiet", {}).get(model, {})
        print(f"{model:<10}" + "".join(
            f"{row.get(p, nan):9.1f} ({row.get(p, nan) / q.get(p, nan):4.2f})" for p in peers))
PYEOF
