#!/bin/sh
# `make bench-peers` (not in CI): tfc's CPU training step next to the frameworks a user would
# pick instead, same networks, batch and 2 threads, in one run of interleaved rounds. The
# peers live in virtual environments under build/peers/ (git-ignored), installed from PyPI
# on first use: torch (eager and torch.compile), tensorflow-cpu + keras (Keras 3 on
# TensorFlow), jax + keras (Keras 3 on JAX, XLA). A peer whose install fails is left out and
# said so. Prints each model's median ms per peer, the fastest peer / tfc, and tfc / the
# sgemm-rate bound (per round, against the rate bench_train measured around that round's
# steps, then the median); each peer's trainable parameter count against tfc's and its
# first step's loss; then the loaded-machine row: each peer's step beside a one-core busy
# loop and its ratio to the quiet step (HOG_ROUNDS=0 leaves it out).
# The slow models (mobilenet, gpt_t128, gpt_t512) run SLOW_STEPS steps after SLOW_WARMUP
# in the first SLOW_ROUNDS rounds of each kind only; MODELS picks models by name.
#   bench/peers.sh BENCH_BINARY   (ROUNDS=3 STEPS=30 WARMUP=20 HOG_ROUNDS=1 HOG_STEPS=10
#       PEERS="torch tf jax" MODELS="mnist_mlp,...,gpt_t512" SLOW_STEPS=STEPS/6
#       SLOW_WARMUP=3 SLOW_ROUNDS=1)
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
warmup=${WARMUP:-20}
slow_steps=${SLOW_STEPS:-$(((steps + 5) / 6))}
slow_hog_steps=${SLOW_STEPS:-$(((hog_steps + 5) / 6))}
slow_warmup=${SLOW_WARMUP:-3}
slow_rounds=${SLOW_ROUNDS:-1}
all="mnist_mlp mnist_cnn char_lstm resnet20 bigru conv1d mobilenet gpt_t128 gpt_t512"
fast=
slow=
for n in $(echo "${MODELS:-$all}" | tr , ' '); do
    [ -f "bench/models/$n.yaml" ] || { echo "peers.sh: no bench/models/$n.yaml" >&2; exit 2; }
    case $n in
    mobilenet | gpt_t*) slow="$slow $n" ;;
    *) fast="$fast $n" ;;
    esac
done
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
# group LOAD STEPS WARMUP MODEL...: the models on tfc and every installed peer once, each
# line tagged with the load; tfc, like the peers' scripts, times 3 repeats of STEPS steps
group() {
    load=$1
    n=$2
    w=$3
    shift 3
    [ $# -gt 0 ] || return 0
    names=$(echo "$@" | tr ' ' ,)
    yamls=
    for m in "$@"; do yamls="$yamls bench/models/$m.yaml"; done
    $clean "$bin" --threads 2 --steps "$n" --warmup "$w" --repeats 3 $yamls | grep '"model"' |
        sed 's/^{/{"peer": "tfc", /' | tag | tee -a "$out/all.jsonl"
    for p in $ok; do
        case $p in
        torch)
            $clean "$venvs/torch/bin/python" bench/torch_bench.py 2 --steps "$n" --warmup "$w" \
                --models "$names" | sed 's/^{/{"peer": "torch eager", /' | tag |
                tee -a "$out/all.jsonl"
            $clean "$venvs/torch/bin/python" bench/torch_bench.py 2 --steps "$n" --warmup "$w" \
                --compile --models "$names" 2>/dev/null |
                sed 's/^{/{"peer": "torch compile", /' | tag |
                tee -a "$out/all.jsonl" || echo "torch.compile failed, left out"
            ;;
        tf)
            $clean KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=3 "$venvs/tf/bin/python" \
                bench/keras_bench.py 2 --steps "$n" --warmup "$w" --models "$names" \
                2>/dev/null | grep '"model"' | tag | tee -a "$out/all.jsonl"
            ;;
        jax)
            $clean KERAS_BACKEND=jax taskset -c 0,1 "$venvs/jax/bin/python" \
                bench/keras_bench.py 2 --steps "$n" --warmup "$w" --models "$names" \
                2>/dev/null | grep '"model"' | tag | tee -a "$out/all.jsonl"
            ;;
        esac
    done
}
# round LOAD STEPS SLOW_STEPS R: the fast models, then the slow ones while R <= SLOW_ROUNDS
round() {
    group "$1" "$2" "$warmup" $fast
    [ "$4" -gt "$slow_rounds" ] || group "$1" "$3" "$slow_warmup" $slow
}

: > "$out/all.jsonl"
r=0
while [ "$r" -lt "$rounds" ]; do
    r=$((r + 1))
    round quiet "$steps" "$slow_steps" "$r"
done
# the loaded-machine row: the same beside a busy loop pinned to CPU 0 (a user's other work)
hog=
trap '[ -n "$hog" ] && kill $hog 2>/dev/null' EXIT
r=0
while [ "$r" -lt "$hog_rounds" ]; do
    r=$((r + 1))
    taskset -c 0 sh -c 'while :; do :; done' &
    hog=$!
    round hog "$hog_steps" "$slow_hog_steps" "$r"
    kill $hog
    wait $hog 2>/dev/null || true
    hog=
done

python3 - "$out/all.jsonl" <<'PYEOF'
import json, statistics, sys
ms, bound, peers, params, loss0 = {}, {}, [], {}, {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    p, load = d["peer"], d.get("load", "quiet")
    if p not in peers: peers.append(p)
    params.setdefault(d["model"], {})[p] = d.get("params")
    loss0.setdefault(d["model"], {}).setdefault(p, d.get("loss0"))
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
print("\ntrainable parameters (tfc's; a peer's differing count is shown) and the loss of "
      "each peer's first step")
print(f"{'model':<10}{'params':>9}" + "".join(f"{s:>16}" for s in short))
for model, row in params.items():
    t = row.get("tfc")
    odd = {p: n for p, n in row.items() if n != t}
    first = [loss0[model].get(p) for p in peers]
    print(f"{model:<10}{str(t):>9}" + "".join(f"{nan if v is None else v:16.4f}" for v in first) +
          ("  PARAMETER COUNTS DIFFER: " + str(odd) if odd else ""))
if "hog" in med:
    print("\nbeside a one-core busy loop: ms per step (x its quiet step)")
    for model, row in med["hog"].items():
        q = med.get("quiet", {}).get(model, {})
        print(f"{model:<10}" + "".join(
            f"{row.get(p, nan):9.1f} ({row.get(p, nan) / q.get(p, nan):4.2f})" for p in peers))
PYEOF
