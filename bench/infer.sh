#!/bin/sh
# make bench-infer: inference through the C API (bench/bench_infer.c) on every zoo model at
# batch 1, 32 and 1000 against onnxruntime on the file tfc-export writes (bench/infer_ort.py:
# its default session options, and its best for each thread count) and PyTorch, eager and
# torch.compile'd, on the same file converted by onnx2torch (bench/infer_torch.py, which
# converts ONNX's LSTM and GRU itself and checks the result against onnxruntime first), in
# interleaved rounds
# (ROUNDS, default 3), at each thread count of THREAD_COUNTS (default "1 2"; tfc's
# tfc_predictor_options.threads, onnxruntime's intra_op_num_threads); at batch 1 also the
# latency (p50, p99). Closes with each peer's median over the rounds, and the open times (tfc's
# cold tfc_predictor_open, onnxruntime's session creation). fortunes_char_lstm_step is
# fortunes_char_lstm on one token (its file with input shape [1], the same weights): one step
# of the recurrence per call, from a zero state (the predictor keeps no state between calls).
# A zoo model of variable length (input shape [null], fortunes_bigru) runs at its max_length
# on both sides: bench_infer.c sizes its examples by tfc_predictor_max_length, and the ONNX
# file has that length. MODELS (default: every zoo model and that step) and BATCHES (default
# "1 32 1000") narrow it; SECONDS_PER_POINT (default 2) per measurement. HOG=1 runs everything
# beside a busy loop pinned to CPU 0 (taskset; as make bench-load's hog), the issue's "one core
# busy": the p99 there is the latency a server on a shared machine sees. TORCH_MODES (default
# "eager compile"; empty: PyTorch left out) chooses PyTorch's runs.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset (this project's VMs preset them; a user's
# machine does not). PyTorch comes from the venv make bench-peers installs (build/peers/torch);
# onnx2torch and onnxruntime (for infer_torch.py's check) are added to it on first use. Not
# part of make test.
# Usage: bench/infer.sh BENCH_INFER BIN_DIR
set -e
bench=${1:?usage: infer.sh BENCH_INFER BIN_DIR} bin=${2:?usage: infer.sh BENCH_INFER BIN_DIR}
seconds=${SECONDS_PER_POINT:-2}
counts=${THREAD_COUNTS:-1 2}
rounds=${ROUNDS:-3}
zoo=$(for m in model_zoo/*/model.yaml; do basename "${m%/model.yaml}"; done)
models=${MODELS:-$zoo fortunes_char_lstm_step}
batches=${BATCHES:-1 32 1000}
torch_modes=${TORCH_MODES-eager compile}
clean="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
torch=build/peers/torch/bin/python
tmp=$(mktemp -d)
hog=
trap 'rm -rf "$tmp"; [ -z "$hog" ] || kill "$hog" 2>/dev/null' EXIT
trap 'exit 130' INT TERM
echo "bench-infer: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, threads $counts, load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${HOG:-0}" = 1 ]; then
    command -v taskset >/dev/null || { echo "HOG=1 needs taskset (util-linux)" >&2; exit 2; }
    taskset -c 0 sh -c 'while :; do :; done' &
    hog=$!
    echo "beside a one-core hog (pid $hog, pinned to CPU 0)"
fi
ort=
if python3 -c "import onnxruntime, numpy" 2>/dev/null; then ort=1; else
    echo "onnxruntime: not installed (pip install onnxruntime): left out"; fi
if [ -x "$torch" ] && { [ -f build/peers/torch/.onnx2torch-ort ] ||
    { "$torch" -m pip install -q onnx onnx2torch onnxruntime && touch build/peers/torch/.onnx2torch-ort; }; }; then :; else
    echo "PyTorch: no venv at build/peers/torch with onnx2torch (make bench-peers installs torch): left out"
    torch=
fi
# model_file MODEL: its file; weights MODEL: its weights
model_file() { if [ "$1" = fortunes_char_lstm_step ]; then echo "$tmp/step.yaml"; else echo "model_zoo/$1/model.yaml"; fi; }
weights() { w=${1%_step}; echo "model_zoo/$w/$w.safetensors"; }
sed 's/shape: \[64\]/shape: [1]/' model_zoo/fortunes_char_lstm/model.yaml > "$tmp/step.yaml"
for m in $models; do
    "$bin/tfc-export" "$(model_file "$m")" --weights "$(weights "$m")" --onnx "$tmp/$m.onnx"
done
# each line: MODEL PEER batch B: R images/s [latency p50 X ms p99 Y ms] (N calls), or
# MODEL PEER open T ms
tag() { sed "s/^[^ ]*/$1 $2/"; }
for r in $(seq "$rounds"); do
    for m in $models; do
        file=$(model_file "$m")
        echo "== round $r: $m"
        [ -z "$ort" ] || $clean -u OMP_NUM_THREADS python3 bench/infer_ort.py "$tmp/$m.onnx" "$seconds" 0 default $batches |
            tag "$m" onnxruntime-default | tee -a "$tmp/all"
        for t in $counts; do
            $clean OMP_NUM_THREADS="$t" "$bench" "$file" "$(weights "$m")" "$seconds" "$t" $batches |
                tag "$m" "tfc-t$t" | tee -a "$tmp/all"
            [ -z "$ort" ] || $clean OMP_NUM_THREADS="$t" python3 bench/infer_ort.py "$tmp/$m.onnx" "$seconds" "$t" best $batches |
                tag "$m" "onnxruntime-best-t$t" | tee -a "$tmp/all"
            if [ -n "$torch" ]; then
                for mode in $torch_modes; do
                    $clean OMP_NUM_THREADS="$t" "$torch" bench/infer_torch.py "$tmp/$m.onnx" "$seconds" "$t" $mode $batches |
                        tag "$m" "torch-$mode-t$t" | tee -a "$tmp/all"
                done
            fi
        done
    done
done
echo "== medians over $rounds rounds: model peer batch images/s [p50 ms p99 ms]"
grep -v " open " "$tmp/all" | awk '{ b = $4; sub(":", "", b); k = $1 " " $2 " " b
       rate[k] = rate[k] " " $5
       if ($7 == "latency") { p50[k] = p50[k] " " $9; p99[k] = p99[k] " " $12 } }
     function med(s,   a, n, j, t, x) { n = split(s, a, " ")
       for (j = 2; j <= n; j++) { x = a[j]; t = j - 1; while (t > 0 && a[t] + 0 > x + 0) { a[t + 1] = a[t]; t-- } a[t + 1] = x }
       return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     END { for (k in rate) { line = sprintf("%-44s %10.1f", k, med(rate[k]))
             if (k in p50) line = line sprintf("  %.3f  %.3f", med(p50[k]), med(p99[k]))
             print line } }' | sort -k1,1 -k3,3n -k2,2
echo "== open (ms, median over $rounds rounds): tfc_predictor_open cold, onnxruntime session creation"
grep " open " "$tmp/all" | awk '{ k = $1 " " $2; v[k] = v[k] " " $4 }
     function med(s,   a, n, j, t, x) { n = split(s, a, " ")
       for (j = 2; j <= n; j++) { x = a[j]; t = j - 1; while (t > 0 && a[t] + 0 > x + 0) { a[t + 1] = a[t]; t-- } a[t + 1] = x }
       return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
     END { for (k in v) printf "%-44s %8.1f\n", k, med(v[k]) }' | sort
