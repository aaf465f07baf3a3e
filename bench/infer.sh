#!/bin/sh
# make bench-infer: inference throughput of the zoo's fashion_cnn and fashion_resnet at batch
# 1, 32 and 1000 through the C API (bench/bench_infer.c) and through onnxruntime on the file
# tfc-export writes (bench/infer_ort.py), in the same run, one after the other per model, with
# the same thread count (THREADS, default: all cores); at batch 1 also the latency (p50, p99).
# SECONDS (default 3) per measurement. Not part of make test.
# Usage: bench/infer.sh BENCH_INFER BIN_DIR
set -e
bench=${1:?usage: infer.sh BENCH_INFER BIN_DIR} bin=${2:?usage: infer.sh BENCH_INFER BIN_DIR}
seconds=${SECONDS_PER_POINT:-3}
threads=${THREADS:-$(nproc)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "bench-infer: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $threads threads, load $(cut -d' ' -f1-3 /proc/loadavg)"
for m in fashion_cnn fashion_resnet; do
    dir=model_zoo/$m
    "$bin/tfc-export" "$dir/model.yaml" --weights "$dir/$m.safetensors" --onnx "$tmp/$m.onnx"
    echo "== $m"
    OMP_NUM_THREADS=$threads "$bench" "$dir/model.yaml" "$dir/$m.safetensors" "$seconds" 1 32 1000
    if python3 -c "import onnxruntime, numpy" 2>/dev/null; then
        python3 bench/infer_ort.py "$tmp/$m.onnx" "$seconds" "$threads" 1 32 1000
    else
        echo "onnxruntime: not installed (pip install onnxruntime): skipped"
    fi
done
