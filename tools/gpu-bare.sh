#!/bin/bash
# Builds and checks tfc on a bare, offline NVIDIA machine (one with CUDA and a Python that
# holds PyTorch, but none of our Debian libraries), e.g. the lent GPU machines of docs/gpu.md.
# Prepare on a machine with Debian's archive, in the repository root:
#   tools/gpu-bare.sh --prepare   downloads the .debs, unpacks them into .deps/root (static
#                                 libraries and docs dropped), packs .deps/root.tar.xz and
#                                 copies Fashion-MNIST into .deps/fmnist (both git-ignored);
#                                 FMNIST_TRAIN=N keeps the first N training images only
#                                 (14000: train_curve's cut, so that the tree, root.tar.xz
#                                 and the data pass the device tool's 64 MiB)
#   tools/gpu-bare.sh --slim      moves the model zoo's weights (27 of the tree's 32 MB;
#                                 nothing on the GPU machine reads them) into
#                                 .deps/zoo-aside, so the whole of Fashion-MNIST fits
#                                 beside the tree and root.tar.xz (about 51 MB);
#                                 --unslim puts them back
# then carry .deps/root.tar.xz (and .deps/fmnist for `curve`/`train`) and run there:
#   tools/gpu-bare.sh STEP...     with STEPs from: build test memcheck bench curve
#                                 bench-data cpu-test (make test, the CPU suite)
#                                 cpu-isa (test_cpu_ops, test_vision, test_weights: the
#                                 CPU kernels' AVX-512 paths, where the host has them;
#                                 test_predictor lone_conv_bits: oneDNN's one-thread and
#                                 team convolutions alike there)
#                                 bench-conv (bench_conv --against direct: oneDNN's
#                                 Winograd on the host's CPU, all its threads)
#                                 dist (tests/gpu/dist.sh) comm (bench/comm_overhead.sh)
#                                 long-t (issue 40's sweep: bench/models/gpt_t2048.yaml at
#                                 T in $LONG_T, batch 1, one step after one warm-up, on tfc,
#                                 PyTorch eager and JAX, each under $LONG_T_TIMEOUT s)
#                                 variants (issue 41: bench_train's step plain, staged,
#                                 --graphs, --conv-find and both, --fast-norm with
#                                 --graphs, --tf32 and --bf16 with --graphs, on $MODELS (the four
#                                 and gpt_t128), two interleaved rounds, JSON lines;
#                                 then tfc-time's per-layer times of resnet20 and
#                                 mnist_cnn at batch 128: where the step goes)
#                                 land (issue 41's landings: the test-gpu cases gating
#                                 each set of tools/gpu-flip.py, one by one; the sets
#                                 whose cases all pass applied to this copy of the tree,
#                                 then a rebuild, make test-gpu and (unless
#                                 LAND_CPU_TEST=0) make test on it; the changed files in
#                                 $OUT/land/, to copy over the checkout and commit)
#                                 e2e (bench/e2e_gpu.sh: tfc-train fashion_resnet against
#                                 bench/torch_train.py's same schedule; MAX_ITER,
#                                 TFC_FLAGS, PEER_MODES, PRECISIONS pass through)
#                                 conv-layout (bench/bench_cudnn.c: cuDNN's convolutions
#                                 on resnet20's and mnist_cnn's shapes in NHWC and NCHW,
#                                 the heuristics' algorithm and the measured fastest,
#                                 strict, TF32 and bfloat16 data)
#                                 profile (Nsight Compute's duration of every kernel of
#                                 bench_train --graphs on $PROFILE_MODELS, resnet20 and
#                                 mnist_mlp by default, 1 + $PROFILE_STEPS (2) steps,
#                                 bench_train flags $PROFILE_FLAGS (e.g. --fast-norm),
#                                 summed by kernel per step:
#                                 bench/ncu_kernels.py; the CSVs in $OUT)
#                                 "train CONFIG [--set K=V...]" (one quoted word);
#                                 "train:NAME CONFIG ..." names its run, log and tar NAME
# Logs go to $OUT (default build/gpu-bare) as STEP.log; `train` also packs the run's
# summary.json, log.csv, config.yaml and final/best weights into $OUT/train.tar (or
# NAME.tar), with its newest snapshot when it did not finish (stopped 20 s before the step's
# limit, it snapshots first). Each step is stopped after STEP_TIMEOUT seconds (590);
# a step that fails is reported and the next one still runs; the exit status is the number
# of failed steps.
set -u
cd "$(dirname "$0")/.."
debs="libyaml-0-2 libyaml-dev libopenblas0-openmp libopenblas-openmp-dev libopenblas-dev
      libgfortran5 libpng16-16 libpng-dev libjpeg62-turbo libjpeg62-turbo-dev libcunit1
      libcunit1-dev libjansson4 libjansson-dev libnettle8 nettle-dev zlib1g zlib1g-dev
      libdnnl2 libdnnl-dev"
if [ "${1:-}" = --slim ] || [ "${1:-}" = --unslim ]; then
    set -e
    mkdir -p .deps/zoo-aside
    for f in model_zoo/*/*.safetensors .deps/zoo-aside/*.safetensors; do
        [ -e "$f" ] || continue
        n=$(basename "$f" .safetensors)
        if [ "$1" = --slim ] && [ "${f#model_zoo/}" != "$f" ]; then mv "$f" .deps/zoo-aside/
        elif [ "$1" = --unslim ] && [ "${f#.deps/}" != "$f" ]; then mv "$f" "model_zoo/$n/"
        fi
    done
    git status --short model_zoo
    exit 0
fi
if [ "${1:-}" = --prepare ]; then
    set -e
    rm -rf .deps/debs .deps/root && mkdir -p .deps/debs .deps/root
    (cd .deps/debs && apt-get download $debs)
    for f in .deps/debs/*.deb; do dpkg -x "$f" .deps/root; done
    find .deps/root -name '*.a' -delete
    rm -rf .deps/root/usr/share/{doc,man,lintian,info}
    # absolute symlinks (zlib's libz.so) would point outside the prefix
    find .deps/root -type l -lname '/*' | while read -r l; do
        t=$(readlink "$l"); ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" ".deps/root$t")" "$l"
    done
    tar cJf .deps/root.tar.xz -C .deps root
    mkdir -p .deps/fmnist && cp /usr/share/datasets/fashion-mnist/*.gz .deps/fmnist/
    if [ -n "${FMNIST_TRAIN:-}" ]; then # IDX headers: magic, count, then rows and columns
        python3 - "$FMNIST_TRAIN" <<'PYEOF'
import gzip, struct, sys
n = int(sys.argv[1])
for name, head, item in (("train-images-idx3-ubyte.gz", 16, 784), ("train-labels-idx1-ubyte.gz", 8, 1)):
    path = ".deps/fmnist/" + name
    data = gzip.open(path).read()
    hdr = bytearray(data[:head])
    struct.pack_into(">I", hdr, 4, n)
    gzip.open(path, "wb", compresslevel=9).write(bytes(hdr) + data[head:head + n * item])
PYEOF
    fi
    du -sh .deps/root.tar.xz .deps/fmnist
    exit 0
fi

OUT=$(realpath -m "${OUT:-build/gpu-bare}"); export OUT
mkdir -p "$OUT"
ncpu=$(getconf _NPROCESSORS_ONLN)  # nproc would follow OMP_NUM_THREADS
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$ncpu}
[ -d .deps/root ] || tar xJf .deps/root.tar.xz -C .deps
cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))' 2>/dev/null)
if [ -n "$cudnn" ] && [ ! -e "$cudnn/lib/libcudnn.so" ]; then
    # the wheel has libcudnn.so.9 only; a private prefix with the link the linker wants
    mkdir -p .deps/cudnn && ln -sfn "$cudnn/include" .deps/cudnn/include
    mkdir -p .deps/cudnn/lib && ln -sfn "$cudnn"/lib/libcudnn.so.9 .deps/cudnn/lib/libcudnn.so
    for f in "$cudnn"/lib/*.so*; do ln -sfn "$f" .deps/cudnn/lib/; done
    cudnn=$PWD/.deps/cudnn
fi
# NCCL from its wheel (nvidia-nccl-*): a prefix with include/nccl.h and lib/libnccl.so, for
# the nccl engine of tests/gpu/dist.sh and bench/comm_overhead.sh
nccl_h=$(find $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null) \
             -name nccl.h -path '*include*' 2>/dev/null | head -1)
nccl_so=$(find $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null) \
              -name 'libnccl.so*' 2>/dev/null | head -1)
nccl=""
if [ -n "$nccl_h" ] && [ -n "$nccl_so" ]; then
    mkdir -p .deps/nccl/lib && ln -sfn "$(dirname "$nccl_h")" .deps/nccl/include
    ln -sfn "$nccl_so" .deps/nccl/lib/libnccl.so
    ln -sfn "$nccl_so" ".deps/nccl/lib/$(basename "$nccl_so")"
    nccl=$PWD/.deps/nccl
fi
if [ -d .deps/fmnist ] && [ ! -e /usr/share/datasets/fashion-mnist ]; then
    mkdir -p /usr/share/datasets && ln -sfn "$PWD/.deps/fmnist" /usr/share/datasets/fashion-mnist
fi
export LD_LIBRARY_PATH=${cudnn:+$cudnn/lib:}${nccl_so:+$(dirname "$nccl_so"):}${LD_LIBRARY_PATH:-}
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .)
mk=(make -j"$ncpu" BUILD=build/gpu-bare CUDA=1 DEPS_PREFIX="$PWD/.deps/root"
    ${cudnn:+CUDNN_PREFIX="$cudnn"} ${nccl:+NCCL_PREFIX="$nccl"}
    ${cc:+GPU_GENCODE="-gencode arch=compute_$cc,code=sm_$cc"})
[ "${1:-}" = --step ] || {
    nvidia-smi; nvcc --version | tail -1; gcc --version | head -1
    echo "cuDNN: ${cudnn:-no wheel: from the toolkit or the system, if any (see the feature line of make)}"; echo "NCCL: ${nccl_so:-not found}"; python3 -c 'import torch; print("torch", torch.__version__)'
} >"$OUT/env.log" 2>&1
# a step's log name: its first word, "train:NAME" giving NAME
stepname() { local w=${1%% *}; [[ $w == train:* ]] && w=${w#train:}; echo "$w"; }
if [ "${1:-}" = --step ]; then
    case $2 in
        build) "${mk[@]}" lib tools build/gpu-bare/tests/gpu/test_gpu_ops \
                   build/gpu-bare/bench/bench_train ;;
        test) "${mk[@]}" test-gpu ;;
        memcheck) "${mk[@]}" test-gpu-memcheck ;;
        bench) "${mk[@]}" bench-gpu ;;
        bench-data) "${mk[@]}" bench-data ;;
        cpu-test) "${mk[@]}" -k test ;;
        cpu-isa) grep -o -m1 'avx512[a-z]*' /proc/cpuinfo | head -1
                 t="test_cpu_ops test_vision test_weights test_predictor" rc=0
                 "${mk[@]}" ${t//test_/build/gpu-bare/tests/test_} || exit 1
                 for x in $t; do
                     case $x in test_predictor) only=lone_conv_bits ;; *) only= ;; esac
                     TFC_BIN=bin build/gpu-bare/tests/$x $only >"$OUT/$x.log" 2>&1 || rc=1
                     grep -E "^ +(tests|asserts) |FAILED|AVX-512" "$OUT/$x.log"
                 done
                 exit $rc ;;
        bench-conv) "${mk[@]}" build/gpu-bare/bench/bench_conv &&
                  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE build/gpu-bare/bench/bench_conv \
                      --against direct --threads "$OMP_NUM_THREADS" --rounds 5 ;;
        curve) tests/gpu/train_curve.sh bin build/gpu-bare/train-curve ;;
        dist) HAVE_NCCL=$("${mk[@]}" -s features | grep -c 'NCCL ✓') \
                  tests/gpu/dist.sh bin build/gpu-bare/gpu-dist ;;
        comm) bench/comm_overhead.sh bin build/gpu-bare/bench-comm ;;
        long-t) "${mk[@]}" build/gpu-bare/bench/bench_train || exit 1
                mkdir -p build/gpu-bare/long-t
                lim=${LONG_T_TIMEOUT:-60}
                for t in ${LONG_T:-32768 65536 131072}; do
                    y=build/gpu-bare/long-t/gpt_t$t.yaml
                    sed "s/2048/$t/g" bench/models/gpt_t2048.yaml >"$y"
                    timeout "$lim" build/gpu-bare/bench/bench_train --device gpu --steps 1 \
                        --repeats 1 --warmup 1 "$y" || echo "gpt_t$t tfc: exit $?"
                    timeout "$lim" python3 bench/torch_bench.py --device cuda --steps 1 \
                        --repeats 1 --warmup 1 --models "gpt_t$t" || echo "gpt_t$t eager: exit $?"
                    XLA_PYTHON_CLIENT_MEM_FRACTION=.95 timeout "$lim" python3 bench/jax_bench.py \
                        --steps 1 --repeats 1 --warmup 1 --models "gpt_t$t" ||
                        echo "gpt_t$t jax: exit $?"
                done ;;
        e2e) BENCH_OUT=build/gpu-bare/e2e bench/e2e_gpu.sh bin ;;
        land) t=build/gpu-bare/tests/gpu/test_gpu_ops
              "${mk[@]}" $t || exit 1
              sets=""
              for s in $(python3 tools/gpu-flip.py --sets); do
                  ok=1
                  for c in $(python3 tools/gpu-flip.py --cases "$s"); do
                      # the case ran and passed: without a usable GPU the program says
                      # "skipped" and exits 0, and a case name it lacks runs nothing
                      if $t "$c" >"$OUT/land_$c.log" 2>&1 &&
                         ! grep -q '^test_gpu_ops: skipped' "$OUT/land_$c.log" &&
                         awk '$1 == "tests" && $3 == 1 && $4 == 1 { ok = 1 } END { exit !ok }' \
                             "$OUT/land_$c.log"; then
                          echo "$s: $c passed"
                      else echo "$s: $c FAILED"; tail -n 20 "$OUT/land_$c.log"; ok=0; fi
                  done
                  [ $ok = 1 ] && sets="$sets $s"
              done
              [ -n "$sets" ] || { echo "land: no set's cases all passed"; exit 1; }
              echo "land: applying$sets"
              rm -rf "$OUT/land" && python3 tools/gpu-flip.py --apply --out "$OUT/land" $sets ||
                  exit 1
              rc=0
              "${mk[@]}" lib tools test-gpu || rc=1
              [ "${LAND_CPU_TEST:-1}" = 0 ] || "${mk[@]}" -k test || rc=1
              echo "land: the flipped tree's files are in $OUT/land (exit $rc)"
              exit $rc ;;
        conv-layout) "${mk[@]}" build/gpu-bare/bench/bench_cudnn || exit 1
                     build/gpu-bare/bench/bench_cudnn && build/gpu-bare/bench/bench_cudnn --tf32 &&
                         build/gpu-bare/bench/bench_cudnn --bf16 ;;
        profile) "${mk[@]}" build/gpu-bare/bench/bench_train || exit 1
                 ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu \
                           "${CUDA_HOME:-/usr/local/cuda}"/bin/ncu 2>/dev/null | head -1)
                 [ -n "$ncu" ] || { echo "profile: no ncu (Nsight Compute) here"; exit 1; }
                 rc=0
                 n=${PROFILE_STEPS:-2}
                 for m in ${PROFILE_MODELS:-resnet20 mnist_mlp}; do
                     # 1 plain step, then n from the graph (captured at the second); ncu
                     # takes some 10-50 ms a kernel, resnet20's step has about 400
                     "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv \
                         --page raw build/gpu-bare/bench/bench_train --device gpu --graphs \
                         ${PROFILE_FLAGS:-} --steps "$n" --repeats 1 --warmup 1 \
                         "bench/models/$m.yaml" \
                         >"$OUT/ncu_$m.csv" 2>"$OUT/ncu_$m.err" || { echo "$m: ncu exit $?"; rc=1; }
                     python3 bench/ncu_kernels.py --steps $((n + 1)) --top 30 "$OUT/ncu_$m.csv" ||
                         rc=1
                 done
                 exit $rc ;;
        variants) "${mk[@]}" build/gpu-bare/bench/bench_train || exit 1
                  for round in 1 2; do
                      for flags in "" --staged --graphs --conv-find "--conv-find --graphs" \
                                   "--fast-norm --graphs" "--tf32 --graphs" "--bf16 --graphs"; do
                          for m in ${MODELS:-mnist_mlp mnist_cnn char_lstm resnet20 gpt_t128}; do
                              build/gpu-bare/bench/bench_train --device gpu --steps 100 \
                                  $flags "bench/models/$m.yaml" || echo "$m [$flags]: exit $?"
                          done
                      done
                  done
                  for m in resnet20 mnist_cnn; do
                      bin/tfc-time "bench/models/$m.yaml" --device gpu --batch 128 \
                          --iterations 50 || echo "tfc-time $m: exit $?"
                  done ;;
        train\ *|train:*) read -r -a a <<<"${2#* }"
                  name=$(stepname "$2")
                  # SIGTERM before the step's own limit: tfc-train snapshots and exits 143
                  timeout -s TERM "$(( ${STEP_TIMEOUT:-590} - 20 ))" \
                      bin/tfc-train "${a[@]}" --device gpu --out "build/gpu-bare/$name"
                  rc=$?
                  # the newest snapshot only when the run stopped early (to resume it
                  # elsewhere): with `ema:` its state alone is ~3 x the weights, and a file
                  # back from the device tool may not pass 16 MiB
                  (cd "build/gpu-bare/$name" && tar cf "$OUT/$name.tar" summary.json \
                      log.csv config.yaml $(ls final.safetensors best.safetensors \
                      $([ $rc = 0 ] || ls -t snapshots/* 2>/dev/null | head -2) 2>/dev/null))
                  exit $rc ;;
        *) echo "unknown step '$2'"; false ;;
    esac
    exit
fi
failed=0
for step in "$@"; do
    t0=$(date +%s)
    timeout -k 10 "${STEP_TIMEOUT:-590}" "$0" --step "$step" >"$OUT/$(stepname "$step").log" 2>&1
    rc=$?
    echo "== $step: exit $rc, $(( $(date +%s) - t0 )) s"
    [ $rc = 0 ] || { failed=$((failed + 1)); tail -n 40 "$OUT/$(stepname "$step").log"; }
done
exit $failed
