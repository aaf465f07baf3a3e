#!/bin/sh
# make bench-infer: inference throughput of the zoo's fashion_cnn and fashion_resnet at batch
# 1, 32 and 1000 through the C API (bench/bench_infer.c), through onnxruntime on the file
# tfc-export writes (bench/infer_ort.py) and through PyTorch eager on the same file converted
# by onnx2torch (bench/infer_torch.py), in interleaved rounds (ROUNDS, default 3) with the same
# thread count (THREADS, default: all cores); at batch 1 also the latency (p50, p99). Closes
# with each peer's median over the rounds. SECONDS_PER_POINT (default 2) per measurement.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset (this project's VMs preset them; a user's
# machine does not). PyTorch comes from the venv make bench-peers installs (build/peers/torch);
# onnx2torch is added to it on first use. Not part of make test.
# Usage: bench/infer.sh BENCH_INFER BIN_DIR
set -e
bench=${1:?usage: infer.sh BENCH_INFER BIN_DIR} bin=${2:?usage: infer.sh BENCH_INFER BIN_DIR}
seconds=${SECONDS_PER_POINT:-2}
threads=${THREADS:-$(nproc)}
rounds=${ROUNDS:-3}
clean="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=$threads"
torch=build/peers/torch/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "bench-infer: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $threads threads, load $(cut -d' ' -f1-3 /proc/loadavg)"
ort=
if python3 -c "import onnxruntime, numpy" 2>/dev/null; then ort=1; else
    echo "onnxruntime: not installed (pip install onnxruntime): left out"; fi
if [ -x "$torch" ] && { [ -f build/peers/torch/.onnx2torch ] ||
    { "$torch" -m pip install -q onnx onnx2torch && touch build/peers/torch/.onnx2torch; }; }; then :; else
    echo "PyTorch: no venv at build/peers/torch with onnx2torch (make bench-peers installs torch): left out"
    torch=
fi
for m in fashion_cnn fashion_resnet; do
    "$bin/tfc-export" "model_zoo/$m/model.yaml" --weights "model_zoo/$m/$m.safetensors" --onnx "$tmp/$m.onnx"
done
for r in $(seq "$rounds"); do
    for m in fashion_cnn fashion_resnet; do
        dir=model_zoo/$m
        echo "== round $r: $m"
        $clean "$bench" "$dir/model.yaml" "$dir/$m.safetensors" "$seconds" 1 32 1000 | sed "s/^/$m /" | tee -a "$tmp/all"
        [ -z "$ort" ] || $clean python3 bench/infer_ort.py "$tmp/$m.onnx" "$seconds" "$threads" 1 32 1000 |
            sed "s/^/$m /" | tee -a "$tmp/all"
        [ -z "$torch" ] || $clean "$torch" bench/infer_torch.py "$tmp/$m.onnx" "$seconds" "$threads" 1 32 1000 |
            sed "s/^/$m /" | tee -a "$tmp/all"
    done
done
echo "== medians over $rounds rounds: model peer batch images/s [p50 ms p99 ms]"
# lines: MODEL PEER [VERSION] batch B: R images/s [latency p50 X ms p99 Y ms] (N calls)
awk '{ peer = $2; i = 3; if ($3 != "batch") { peer = peer "-" $3; i = 4 }
       b = $(i + 1); sub(":", "", b); k = $1 " " peer " " b
       rate[k] = rate[k] " " $(i + 2)
       if ($(i + 4) == "latency") { p50[k] = p50[k] " " $(i + 6); p99[k] = p99[k] " " $(i + 9) } }
     function med(s,   a, n, j, t, x) { n = split(s, a, " ")
       for (j = 2; j <= n; j++) { x = a[j]; t = j - 1; while (t > 0 && a[t] + 0 > x + 0) { a[t + 1] = a[t]; t-- } a[t + 1] = x }
       return a[int((n + 1) / 2)] }
     END { for (k in rate) { line = sprintf("%-40s %10.1f", k, med(rate[k]))
             if (k in p50) line = line sprintf("  %.3f  %.3f", med(p50[k]), med(p99[k]))
             print line } }' "$tmp/all" | sort -k1,1 -k2,2 -k3,3n
