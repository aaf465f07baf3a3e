#!/bin/sh
# make zoo-retrain: retrains the zoo's cheap models (fashion_mlp, fortunes_classify,
# fortunes_bigru, fortunes_conv_bigru, fortunes_bag_of_bigrams, fortunes_encoder; MODELS to
# choose) with the command
# and --threads their README front matter records, and compares the run's final test metric
# with the README's value exactly (both printed with 6 significant digits, as tools/zoo-package.sh writes it).
# A change that alters training results fails here: retrain, repackage
# (tools/zoo-package.sh) and update the README tables in the same commit.
# Needs the data packages (tools/install-deps.sh --data). Not part of make test (minutes).
#   tools/zoo-retrain.sh BIN_DIR [OUT_DIR]
set -e
bin=${1:?usage: zoo-retrain.sh BIN_DIR [OUT_DIR]}
out=${2:-build/zoo-retrain}
models=${MODELS:-"fashion_mlp fortunes_classify fortunes_bigru fortunes_conv_bigru fortunes_bag_of_bigrams
                  fortunes_encoder"}
status=0
for m in $models; do
    readme=model_zoo/$m/README.md
    field() { sed -n "/^---$/,/^---$/s/^$1: *//p" "$readme" | head -1 | sed 's/^"\(.*\)"$/\1/'; }
    cmd=$(field command) threads=$(field threads)
    config=${cmd#tfc-train }
    want=$(sed -n 's/^metric: .*value: *\([^,}]*\).*/\1/p' "$readme")
    metric=$(sed -n 's/^metric: {name: *\([^,]*\),.*/\1/p' "$readme")
    [ -n "$threads" ] || { echo "$m: the README records no threads:"; status=1; continue; }
    echo "== $m: $bin/tfc-train $config --threads $threads (README: $metric $want, commit $(field commit))"
    start=$(date +%s)
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$bin/tfc-train" "$config" --threads "$threads" \
        --out "$out/$m" --overwrite --quiet
    got=$(python3 - "$out/$m/summary.json" "$metric" <<'PY'
import json, math, sys
s = json.load(open(sys.argv[1]))
t = s["final"]["test"]
v = t["loss"] / math.log(2) if sys.argv[2] == "bits_per_character" else t[sys.argv[2]]
print("%.6g" % v)
PY
)
    echo "$m: $metric $got in $(( $(date +%s) - start )) s; README $want"
    if [ "$got" = "$want" ]; then echo "$m: reproduced"; else echo "$m: DIFFERS from the README"; status=1; fi
done
exit $status
