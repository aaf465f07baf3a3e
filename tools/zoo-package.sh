#!/bin/sh
# Packages a finished training run as model_zoo/NAME/: model.yaml, solver.yaml (the config
# with `model: model.yaml`), NAME.safetensors (the run's final weights), vocabulary.txt when
# the run has one, and README.md whose front matter takes every number from the run's
# summary.json (nothing typed by hand). Then `tfc-zoo verify NAME` and `tfc-zoo test NAME`.
#   tools/zoo-package.sh NAME RUN_DIR CONFIG.yaml "DEVICE TEXT" "TASK" "DATASET" [bpc]
# The last argument `bpc` records bits per character (test loss / ln 2) instead of the
# model's first metric. THREADS (default: this machine's cores, tfc-train's default) is the
# --threads the run used; the front matter records it with the commit of this checkout (or
# COMMIT, the one the run was trained at when the checkout has moved on since), so
# `make zoo-retrain` can repeat the run (issue 19 item 11).
set -e
name=$1 run=$2 config=$3 device=$4 task=$5 dataset=$6 mode=$7
[ -n "$dataset" ] || { echo "usage: $0 NAME RUN_DIR CONFIG.yaml DEVICE TASK DATASET [bpc]" >&2; exit 2; }
[ -f "$run/final.safetensors" ] && [ -f "$run/summary.json" ] || { echo "$0: $run has no final.safetensors/summary.json" >&2; exit 1; }
zoo=${TFC_ZOO:-model_zoo}
dir=$zoo/$name
mkdir -p "$dir"
model=$(sed -n 's/^model: *\([^ #]*\).*/\1/p' "$config")
cp "$(dirname "$config")/$model" "$dir/model.yaml"
sed "s|^model: .*|model: model.yaml|; s|^snapshot: .*|snapshot: {interval: 0, keep: 1}|" "$config" > "$dir/solver.yaml"
cp "$run/final.safetensors" "$dir/$name.safetensors"
[ -f "$run/vocabulary.txt" ] && cp "$run/vocabulary.txt" "$dir/vocabulary.txt"
sha=$(sha256sum "$dir/$name.safetensors" | cut -d' ' -f1)
threads=${THREADS:-$(nproc)}
if [ -n "${COMMIT:-}" ]; then commit=$COMMIT; else
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    git diff --quiet HEAD -- src include 'tools/*.c' 2>/dev/null || commit="$commit+uncommitted changes"
fi
python3 - "$run/summary.json" "$dir/README.md" "$name" "$sha" "$config" "$device" "$task" "$dataset" "$mode" "$threads" "$commit" <<'PY'
import json, math, struct, sys
summ, out, name, sha, config, device, task, dataset, mode, threads, commit = sys.argv[1:]
# the class names the trainer recorded in the weights' metadata (safetensors header)
with open(out.rsplit("/", 1)[0] + "/" + name + ".safetensors", "rb") as w:
    meta = json.loads(w.read(struct.unpack("<Q", w.read(8))[0])).get("__metadata__", {})
classes = json.loads(meta["classes"]) if "classes" in meta else []
s = json.load(open(summ))
assert s["status"] == "completed", s["status"]
test = s["final"]["test"]
if mode == "bpc":
    metric, value, hib = "bits_per_character", test["loss"] / math.log(2), "false"
else:
    metric = s["best"]["metric"]
    value, hib = test[metric], ("false" if metric == "loss" else "true")
q = json.dumps  # a JSON string is a YAML scalar
# the scalar metrics (final.test also holds per-class lists and the confusion matrix)
others = ", ".join("%s %.4f" % (k, v) for k, v in test.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool))
fm = f"""---
name: {name}
task: {q(task)}
dataset: {q(dataset)}
metric: {{name: {metric}, value: {value:.6g}, higher_is_better: {hib}}}
weights: {name}.safetensors
sha256: {sha}
command: {q("tfc-train " + config)}
threads: {threads}
commit: {q(commit)}
training_time: {q("%.0f s (%d iterations, %.2f it/s)" % (s["wall_seconds"], s["iterations"], s["iterations_per_second"]))}
device: {q(device)}
licence: {q("weights MIT; the data set's own licence applies to it")}
---
"""
body = f"""
# {name}

{task} on {dataset}. Final test results of the run that produced these weights
(`summary.json`): {others}; best test {s["best"]["metric"]} {s["best"]["value"]:.4f} at
iteration {s["best"]["iteration"]}.
""" + (f"""
Classes (recorded in the weights' metadata, printed by `tfc-predict` and `tfc-zoo info`): {", ".join(f"{i} {c}" for i, c in enumerate(classes))}.
""" if classes else "") + f"""
```sh
tfc-zoo verify {name}        # SHA-256 of {name}.safetensors against this front matter
tfc-zoo test {name}          # re-evaluates on the test split
tfc-test model_zoo/{name}/solver.yaml --weights model_zoo/{name}/{name}.safetensors
```

Trained with `tfc-train {config} --threads {threads}` at commit {commit} ({s["iterations"]}
iterations, {s["wall_seconds"]:.0f} s on {device}).
"""
open(out, "w").write(fm + body)
PY
echo "packaged $dir (sha256 $sha)"
