#!/bin/sh
# make test-netns: a data-parallel run between two "machines" — two network namespaces of
# this one, joined by a veth pair (10.77.N.1 and 10.77.N.2) — over Open MPI's TCP transport,
# mpirun starting the remote rank through an rsh agent that enters the other namespace (as
# ssh would enter the other machine). Checks:
#   1. deterministic: true — the 2 ranks over TCP end with the bytes of the same 2 ranks on
#      one machine (shared memory) and of one process with iter_size 2 over batches of 16;
#   2. SIGKILL of the remote rank mid-run ends the job within 30 s, non-zero, and its newest
#      snapshot resumes over TCP to the bytes of the uninterrupted run.
# Needs root (ip netns), iproute2 and mpirun; says why and exits 0 without them. Not part of
# make test (CI's containers may not allow network namespaces).
#   netns.sh BINDIR OUTDIR
set -eu
bin=$(cd "${1:?usage: netns.sh BINDIR OUTDIR}" && pwd)
out=${2:?usage: netns.sh BINDIR OUTDIR}
skip() { echo "netns: skipped ($1)"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root for ip netns"
command -v ip >/dev/null || skip "no ip (apt install iproute2)"
command -v mpirun >/dev/null || skip "no mpirun (apt install openmpi-bin)"
rm -rf "$out"; mkdir -p "$out"; out=$(cd "$out" && pwd)
id=$$
net=$((id % 200 + 20))
a=tfc${id}a b=tfc${id}b
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add "$a" 2>/dev/null || skip "ip netns add is not permitted here"
ip netns add "$b"
ip link add "v${id}a" type veth peer name "v${id}b"
ip link set "v${id}a" netns "$a"
ip link set "v${id}b" netns "$b"
ip -n "$a" addr add "10.77.$net.1/24" dev "v${id}a"
ip -n "$b" addr add "10.77.$net.2/24" dev "v${id}b"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "v${id}a" up
ip -n "$b" link set "v${id}b" up
# the rsh agent: "agent [options] HOST COMMAND..." runs COMMAND in HOST's namespace
cat >"$out/agent.sh" <<EOF
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift;; *) break;; esac; done
host=\$1; shift
case "\$host" in 10.77.$net.1) ns=$a;; 10.77.$net.2) ns=$b;; *) exit 1;; esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
EOF
chmod +x "$out/agent.sh"
printf '10.77.%s.1 slots=1\n10.77.%s.2 slots=1\n' "$net" "$net" >"$out/hosts"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
python3 "$(dirname "$0")/util/write_split.py" "$out"
cat >"$out/solver.yaml" <<'YAML'
model:
  name: netns_mlp
  input: {shape: [16]}
  layers:
    - Dense: {units: 64, activation: relu}
    - Dropout: {rate: 0.1}
    - Dense: {units: 4, activation: softmax}
data:
  train:
    source: {type: npy, features: x.npy, labels: y.npy}
    pipeline: [{shuffle: {buffer_size: 512}}, {repeat: {}}, {batch: {batch_size: 32}}]
optimizer: {type: adam, learning_rate: 0.01}
max_iter: 60
snapshot: {interval: 10}
seed: 3
deterministic: true
YAML
over_tcp="ip netns exec $a mpirun -np 2 --hostfile $out/hosts --mca plm_rsh_agent $out/agent.sh
    --mca btl tcp,self --mca btl_tcp_if_include 10.77.$net.0/24
    --mca oob_tcp_if_include 10.77.$net.0/24 -x OMP_NUM_THREADS"
train() { # NAME LAUNCHER... -- tfc-train's own arguments follow the launcher
    name=$1; shift
    "$@" "$bin/tfc-train" "$out/solver.yaml" --device cpu --quiet --out "$out/$name" \
        >"$out/$name.log" 2>&1
}
same_bytes() { cmp -s "$out/$1/final.safetensors" "$out/$2/final.safetensors"; }
status=0
"$bin/tfc-train" "$out/solver.yaml" --device cpu --quiet --out "$out/one" --set iter_size=2 \
    --set data.train.pipeline.2.batch.batch_size=16 >"$out/one.log" 2>&1 || { cat "$out/one.log"; exit 1; }
train local mpirun -np 2 || { cat "$out/local.log"; exit 1; }
# shellcheck disable=SC2086
train tcp $over_tcp || { echo "netns: the run over TCP failed:"; cat "$out/tcp.log"; exit 1; }
grep -q "\"ranks\": 2" "$out/tcp/summary.json" || { echo "netns: not 2 ranks:"; cat "$out/tcp/summary.json"; exit 1; }
if same_bytes tcp local; then echo "  1. over TCP = on one machine, byte for byte"
else echo "  1. FAILED: over TCP differs from the same ranks on one machine"; status=1; fi
if same_bytes tcp one; then echo "  1. over TCP = one process with iter_size 2, byte for byte"
else echo "  1. FAILED: over TCP differs from one process with iter_size 2"; status=1; fi
# 2. kill -9 of the remote rank: a longer run, killed once it has a snapshot
sed 's/^max_iter: 60$/max_iter: 200000/' "$out/solver.yaml" >"$out/long.yaml"
# shellcheck disable=SC2086
$over_tcp "$bin/tfc-train" "$out/long.yaml" --device cpu --quiet --out "$out/killed" \
    >"$out/killed.log" 2>&1 &
job=$!
for _ in $(seq 300); do ls "$out/killed/snapshots/"*_iter_20.state >/dev/null 2>&1 && break; sleep 0.1; done
remote=$(ip netns pids "$b" | while read -r p; do
    [ "$(cat /proc/"$p"/comm 2>/dev/null)" = tfc-train ] && echo "$p"; done | head -1)
[ -n "$remote" ] || { echo "  2. FAILED: no tfc-train in $b"; status=1; }
start=$(date +%s)
kill -9 "$remote" 2>/dev/null || true
rc=0; wait "$job" || rc=$?
took=$(( $(date +%s) - start ))
if [ "$rc" -ne 0 ] && [ "$took" -le 30 ]; then echo "  2. remote rank killed: the job ended in ${took} s, exit $rc"
else echo "  2. FAILED: the job ended in ${took} s with exit $rc"; status=1; fi
newest=$(ls "$out/killed/snapshots/"*.state | sort -t_ -k3 -n | tail -1)
# resumed with the short run's max_iter: the same 60 steps as the uninterrupted run
iter=${newest##*_iter_}; iter=${iter%.state}
if [ "$iter" -le 60 ]; then
    # shellcheck disable=SC2086
    $over_tcp "$bin/tfc-train" "$out/long.yaml" --device cpu --quiet --out "$out/resumed" \
        --set max_iter=60 --resume "$newest" >"$out/resumed.log" 2>&1 || {
        echo "  2. FAILED: the resume over TCP failed:"; cat "$out/resumed.log"; status=1; }
    if same_bytes resumed tcp; then echo "  2. resumed from iteration $iter over TCP = the uninterrupted run, byte for byte"
    else echo "  2. FAILED: the resumed run differs from the uninterrupted one"; status=1; fi
else
    echo "  2. note: the newest snapshot is at $iter (> 60): resume not compared"
fi
exit $status
