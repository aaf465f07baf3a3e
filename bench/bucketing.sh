#!/bin/sh
# make bench's bucketing row (issue 39): fortunes_bigru's training step on the batches of
# configs/fortunes_classify_bucketed.yaml (bucket_by_sequence_length, each batch padded to its
# longest record) against the same run with every batch padded to 80 (padded_batch with
# padded_shapes [80]): same seed, 2 threads, no test pass. ms per step from log.csv between
# iteration 100 and ITERS (past the warm-up); tokens/s counts the records' own tokens, not
# the padding. The gain is set against the ratio of padded tokens saved over one epoch,
# sum(80 · batch size) / sum(batch length · batch size), from the length of every training
# record in the pipeline's order (tfc-data) put into batches by tf.data's bucketing rule
# (docs/data.md). One run each: on a loaded machine the gain moves with the load.
#   bench/bucketing.sh BIN_DIR
set -e
bin=${1:?usage: bucketing.sh BIN_DIR}
out=${BENCH_OUT:-build/bench}/bucketing
iters=${ITERS:-300}
config=configs/fortunes_classify_bucketed.yaml
mkdir -p "$out"
clean="env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"
bucket='bucket_by_sequence_length: {boundaries: \[12, 24, 40\], batch_sizes: \[32, 32, 32, 32\]}'
# the variants: the model by its absolute path, no snapshots, tests after the last iteration
common="s|^model: models/|model: $PWD/configs/models/|;
s|^snapshot: .*|snapshot: {interval: 0, keep: 1}|;
s|^max_iter: .*|max_iter: $iters|; s|^test_interval: .*|test_interval: $iters|"
sed "$common" "$config" > "$out/bucketed.yaml"
sed "$common; s|$bucket|padded_batch: {batch_size: 32, padded_shapes: [80]}|" "$config" \
    > "$out/padded.yaml"
sed "$common; s|$bucket|padded_batch: {batch_size: 1, padded_shapes: [80]}|; /- repeat: {}/d" \
    "$config" > "$out/records.yaml"
grep -q 'padded_shapes: \[80\]}' "$out/padded.yaml" ||
    { echo "$0: no bucketing stage in $config" >&2; exit 1; }
$clean "$bin/tfc-data" "$out/records.yaml" --take 1000000 --output "$out/records" > /dev/null
for v in bucketed padded; do
    $clean "$bin/tfc-train" "$out/$v.yaml" --threads 2 --out "$out/$v" --overwrite --quiet \
        > "$out/$v.log"
done
python3 - "$out" "$iters" <<'PYEOF'
import bisect, csv, sys
import numpy as np
out, iters = sys.argv[1], int(sys.argv[2])
lengths = np.load(f"{out}/records.lengths.npy").astype(int)
# tf.data's bucket_by_sequence_length over one epoch: bucket i holds [b[i-1], b[i]); a full
# bucket is a batch at its longest length; the partial buckets follow at the end
bounds, size = [12, 24, 40], 32
buckets, batches = [[] for _ in range(len(bounds) + 1)], []
for n in lengths:
    b = buckets[bisect.bisect_right(bounds, n)]
    b.append(n)
    if len(b) == size:
        batches.append(list(b))
        b.clear()
batches += [b for b in buckets if b]
padded = sum(80 * len(b) for b in batches)
bucketed = sum(max(b) * len(b) for b in batches)
ratio = padded / bucketed
tokens = lengths.mean() * size  # the records' own tokens in a batch of 32
def ms_per_step(v):
    rows = {int(r["iter"]): float(r["seconds"]) for r in csv.DictReader(open(f"{out}/{v}/log.csv"))
            if r["phase"] == "train"}
    return 1000 * (rows[iters] - rows[100]) / (iters - 100)
b, p = ms_per_step("bucketed"), ms_per_step("padded")
print(f"\n{'fortunes_bigru':<21} {'ms/step':>8} {'tokens/s':>9}")
print(f"{'bucketed':<21} {b:8.2f} {tokens / b * 1000:9.0f}")
print(f"{'padded to 80':<21} {p:8.2f} {tokens / p * 1000:9.0f}")
print(f"bucketing gain {p / b:.2f}x; padded tokens saved {ratio:.2f}x ({len(lengths)} records, "
      f"{len(batches)} batches an epoch, mean length {lengths.mean():.1f}); steps "
      f"100-{iters} of one run each, 2 threads")
PYEOF
