#!/usr/bin/env python3
"""Lands GPU kernels that have passed `make test-gpu` on a real GPU (issue 41, docs/gpu.md).

Kernels land on the GPU in two steps: first compiled but held out of the GPU's op table
(the layer ops, the precision ops, the regression losses) or their layers marked
`cpu_first`, each with a `make test-gpu` case that puts them in for its process; then,
once those cases have passed on a GPU, this script's edit ("flip") puts them in for good.
Each SET of edits is gated by the test-gpu cases that exercise it:

  precision  round_bf16, round_f16 and loss_scale_at into the GPU's table; the hook
             tfc_gpu_test_enable_bf16 gone; train_curve.sh's bf16 refusal check becomes a
             bf16 run on the GPU against the CPU's
  layer-ops  every op of TFC_BACKEND_LAYER_OPS moved to TFC_BACKEND_MATH_OPS and into the
             GPU's table; every layer's `cpu_first` flag gone. Recurring: the hook
             tfc_gpu_test_enable_layer_ops and the lifting of cpu_first in test_gpu_ops.c
             stay (doing nothing while nothing is held out) for the next layers
  losses     the GPU's tfc_backend.losses takes every kind (the element-wise losses past MSE)

usage: tools/gpu-flip.py --check            every anchor of every pending set matches
                                            (nothing is written; a set that has landed is
                                            said so), every cpu_first layer is trained by a
                                            test-gpu case, every held-out op has a GPU
                                            kernel; exit 1 naming what does not hold
       tools/gpu-flip.py --sets             the names of the sets with something to land
       tools/gpu-flip.py --cases SET        the test-gpu cases gating SET (test_gpu_ops CASE)
       tools/gpu-flip.py --apply [--out DIR] SET...
                                            applies the sets (all anchors checked first:
                                            nothing is written unless every one matches);
                                            with --out, each changed file is also copied
                                            to DIR/PATH, to carry back from a GPU machine
Run from anywhere; paths are the repository's. `make test` runs --check (test_tools), so
the anchors move with the code. tools/gpu-bare.sh's `land` step runs the gating cases on
a GPU and applies the sets whose cases all pass.
"""
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU_TESTS = "tests/gpu/test_gpu_ops.c"


class Anchor(Exception):
    """An edit's anchor did not match: the code moved under the script."""


class Tree:
    """The files the edits read and write, kept in memory until every edit has matched."""

    def __init__(self):
        self.text, self.orig = {}, {}

    def get(self, path):
        if path not in self.text:
            with open(os.path.join(ROOT, path)) as f:
                self.text[path] = self.orig[path] = f.read()
        return self.text[path]

    def put(self, path, text):
        self.text[path] = text

    def changed(self):
        return [p for p in self.text if self.text[p] != self.orig[p]]


def replace(tree, path, old, new, count=1):
    """Replaces exactly `count` occurrences of old (0: one or more) in path."""
    text = tree.get(path)
    n = text.count(old)
    if n == 0 or (count and n != count):
        raise Anchor(f"{path}: expected {count or 'some'} of {old.strip()[:70]!r}, found {n}")
    tree.put(path, text.replace(old, new))


def sub(tree, path, pattern, new, flags=re.M, count=1):
    """re.sub with a check that the pattern matched exactly `count` times (0: at least once)."""
    repl = new if callable(new) else (lambda m: new)  # new is taken literally
    text, n = re.subn(pattern, repl, tree.get(path), flags=flags)
    if n == 0 or (count and n != count):
        raise Anchor(f"{path}: expected {count or 'some'} match of /{pattern[:70]}/, found {n}")
    tree.put(path, text)


def delete_function(tree, path, signature, with_comment=True):
    """Deletes the C function whose definition starts with the line `signature` (its body
    ends at the first line that is just "}"), with the comment block right above it."""
    text = tree.get(path)
    start = text.find("\n" + signature + "\n")
    if start < 0:
        raise Anchor(f"{path}: no function {signature!r}")
    start += 1
    end = text.find("\n}\n", start)
    if end < 0:
        raise Anchor(f"{path}: {signature!r} has no closing brace")
    end += 3
    if with_comment:
        before = text[:start]
        m = re.search(r"/\*(?:(?!\*/).)*\*/\n$", before, re.S)
        if m and before[: m.start()].endswith("\n"):
            start = m.start()
    if text[end : end + 1] == "\n":  # the blank line after it
        end += 1
    tree.put(path, text[:start] + text[end:])


def delete_lines(tree, path, pattern, count=0):
    """Deletes every line matching pattern (anchored at the line's start; at least one)."""
    sub(tree, path, r"^" + pattern + r"\n", "", count=count)


def macro_body(text, name):
    """(start, end, body lines) of `#define NAME(X)` and its continued lines."""
    m = re.search(r"^#define " + re.escape(name) + r"\(X\)[^\n]*\n", text, re.M)
    if not m:
        raise Anchor(f"no #define {name}(X)")
    lines, pos = [], m.end()
    while True:
        nl = text.find("\n", pos)
        line = text[pos:nl]
        lines.append(line)
        pos = nl + 1
        if not line.rstrip().endswith("\\"):
            break
    return m.start(), pos, m.group(0), lines


def layer_ops(tree):
    """The op names of TFC_BACKEND_LAYER_OPS."""
    _, _, _, body = macro_body(tree.get("src/core/backend.h"), "TFC_BACKEND_LAYER_OPS")
    return re.findall(r"X\([^,]+,\s*(\w+),", "\n".join(body))


def continued(line):
    """line with a continuation backslash at column 100, as clang-format lays them out."""
    return line.rstrip().ljust(99) + "\\"


# ---- the sets ---------------------------------------------------------------------------

def flip_precision(tree):
    gb, gh = "src/gpu/gpu_backend.cu", "src/gpu/gpu.h"
    replace(tree, gb,
            "    /* TFC_BACKEND_PRECISION_OPS: none until their kernels have run on a GPU (docs/gpu.md;\n"
            "     * tfc_gpu_test_enable_bf16 puts them in for that test); a model asking for bf16 or\n"
            "     * float16 is refused at bind */\n"
            "    .round_bf16 = NULL,\n"
            "    .round_f16 = NULL,\n"
            "    .loss_scale_at = NULL,\n",
            "    /* TFC_BACKEND_PRECISION_OPS: precision bf16 and float16 (gpu_elementwise.cu) */\n"
            "    .round_bf16 = tfc_gpu_round_bf16,\n"
            "    .round_f16 = tfc_gpu_round_f16,\n"
            "    .loss_scale_at = tfc_gpu_loss_scale_at,\n")
    delete_function(tree, gb, "void tfc_gpu_test_enable_bf16(int on)", with_comment=False)
    sub(tree, gh, r"^/\* For tests, process-wide: 1 puts the precision ops(?:(?!\*/).)*\*/\n"
        r"void tfc_gpu_test_enable_bf16\(int on\);\n\n", "", flags=re.M | re.S)
    replace(tree, gh,
            " * The precision ops (TFC_BACKEND_PRECISION_OPS) stay outside the table until\n"
            " * tfc_gpu_test_enable_bf16's case has passed on a GPU.\n", "")
    delete_function(tree, GPU_TESTS, "static void enable_bf16(int on)")
    delete_lines(tree, GPU_TESTS, r"[ \t]*enable_bf16\([01]\);")
    bt = "bench/bench_train.c"
    replace(tree, bt,
            " * TF32 as the trainer sets it, round_bf16 put into the GPU's table for the process\n"
            " * (tfc_gpu_test_enable_bf16: its kernel has not landed there yet).\n",
            " * TF32 as the trainer sets it.\n")
    delete_lines(tree, bt, r"[ \t]*tfc_gpu_test_enable_bf16\(bf16\);", count=1)
    tc = "tests/gpu/train_curve.sh"
    replace(tree, tc,
            "# runs. Also: deterministic: true gives identical weights twice, precision: bf16 is refused\n"
            "# (until the GPU has its kernels), and a gpu_memory_limit\n",
            "# runs. Also: deterministic: true gives identical weights twice, precision: bf16 trains\n"
            "# on the GPU as on the CPU (every displayed loss within BF16_TOL, default 0.1), and a\n"
            "# gpu_memory_limit\n")
    sub(tree, tc, r"^# precision: bf16 is refused on the GPU until its kernels have run there.*?"
        r"\n    cat \"\$out/bf16\.log\"; exit 1\nfi\n", BF16_CURVE, flags=re.M | re.S)


BF16_CURVE = r'''# precision: bf16 trains on the GPU as on the CPU: 200 iterations of each from the same
# seed, every displayed loss within BF16_TOL (relative; bfloat16's 8-bit mantissa and TF32's
# products on the GPU against the CPU's exact ones)
train bf16_gpu gpu --set precision=bf16
train bf16_cpu cpu --set precision=bf16
python3 - "$out" "${BF16_TOL:-0.1}" <<'PY' || curve=1
import csv, sys
out, tol = sys.argv[1], float(sys.argv[2])
def losses(name):
    return {int(r["iter"]): float(r["loss"]) for r in csv.DictReader(open(f"{out}/{name}/log.csv"))
            if r["phase"] == "train"}
g, c = losses("bf16_gpu"), losses("bf16_cpu")
d = {i: abs(g[i] - c[i]) / abs(c[i]) for i in sorted(set(g) & set(c))}
if not d: sys.exit("train_curve: FAILED: the bf16 runs displayed no common loss")
print(f"  bf16 GPU vs CPU: {len(d)} displayed losses, largest relative difference "
      f"{max(d.values()):.2e}")
bad = [i for i in d if not d[i] <= tol]
for i in bad: print(f"train_curve: bf16 iter {i}: {g[i]:.6g} vs {c[i]:.6g} ({d[i]:.3g} > {tol})")
sys.exit(1 if bad else 0)
PY
'''


def flagged_layers(tree, strip):
    """The layer files that set cpu_first; with strip, the flags removed from them."""
    found = []
    for name in sorted(os.listdir(os.path.join(ROOT, "src/layers"))):
        path = "src/layers/" + name
        if not name.endswith(".c"):
            continue
        text = tree.get(path)
        new = re.sub(r" ?\.cpu_first = 1,$", "", text, flags=re.M)
        new = re.sub(r"\.cpu_first = 1, ", "", new)
        new = re.sub(r",? ?\.cpu_first = 1\b", "", new)
        new = re.sub(r"^[ \t]+\n", "", new, flags=re.M) if new != text else new
        new = new.replace("TD_OPS(tfc_time_distributed_ops, 1);",
                          "TD_OPS(tfc_time_distributed_ops, 0);")
        if new != text:
            found.append(path)
            if strip:
                tree.put(path, new)
    return found


def flip_layer_ops(tree):
    """Recurring: each wave's layer ops and cpu_first layers land the same way. The test
    hook, the GPU table's NULL slots for TFC_BACKEND_LAYER_OPS and test_gpu_ops.c's lifting
    stay, for the next layer that lands CPU-first."""
    bh, gb = "src/core/backend.h", "src/gpu/gpu_backend.cu"
    ops = layer_ops(tree)
    flagged = flagged_layers(tree, strip=True)
    if not ops and not flagged:
        raise Anchor("nothing to land: TFC_BACKEND_LAYER_OPS is empty and no layer sets "
                     "cpu_first")
    if not ops:
        return
    text = tree.get(bh)
    # the layer ops' lines join the end of TFC_BACKEND_MATH_OPS; the list stays, empty
    ls, le, head, body = macro_body(text, "TFC_BACKEND_LAYER_OPS")
    text = text[:ls] + head.rstrip().rstrip("\\").rstrip() + "\n" + text[le:]
    ms, me, mhead, mbody = macro_body(text, "TFC_BACKEND_MATH_OPS")
    mbody = mbody[:-1] + [continued(mbody[-1]), continued("")] + body
    text = text[:ms] + mhead + "\n".join(mbody) + "\n" + text[me:]
    tree.put(bh, text)
    sub(tree, bh, r"^/\* The kernels of layers that land on one backend \(the CPU\) before the other"
        r"(?:(?!\*/).)*\*/\n(?=#define TFC_BACKEND_LAYER_OPS)",
        "/* The kernels of layers that land on one backend (the CPU) before the other: a backend may\n"
        " * leave these slots NULL. tfc_backend_check passes them; a layer that needs one lists it in\n"
        " * tfc_layer_ops.needs, and binding a model with that layer on a backend without it fails\n"
        " * naming the layer (graph.c), so `--device gpu` refuses such a model at start-up instead\n"
        " * of crashing in it. An op moves to TFC_BACKEND_MATH_OPS once every backend has it (and\n"
        " * `make test-gpu` has passed on a real GPU: tools/gpu-flip.py). */\n",
        flags=re.M | re.S)
    heading = "    /* landed from TFC_BACKEND_LAYER_OPS after make test-gpu (tools/gpu-flip.py) */\n"
    entries = "".join(f"    .{op} = tfc_gpu_{op},\n" for op in ops)
    sub(tree, gb, r"^    /\* the layer kernels (?:(?!\*/).)*\*/\n"
        r"    TFC_BACKEND_LAYER_OPS\(GPU_NO_KERNEL\)\n",
        ("" if heading in tree.get(gb) else heading) + entries +
        "    /* the layer kernels not run on a GPU yet (TFC_BACKEND_LAYER_OPS), which\n"
        "     * tfc_gpu_test_enable_layer_ops puts in for make test-gpu's cases: a model whose\n"
        "     * layer needs one is refused at bind, naming it */\n"
        "    TFC_BACKEND_LAYER_OPS(GPU_NO_KERNEL)\n", flags=re.M | re.S)


def flip_losses(tree):
    replace(tree, "src/gpu/gpu_backend.cu",
            "    /* the cross-entropies and MSE; MAE, Huber and log-cosh (gpu_loss.cu) join once make\n"
            "     * test-gpu's regression_losses case has passed on a GPU */\n"
            "    be->losses = (1u << TFC_LOSS_MAE) - 1;\n",
            "    be->losses = (1u << TFC_LOSS_COUNT) - 1; /* every one (gpu_loss.cu) */\n")


SETS = {"precision": flip_precision, "layer-ops": flip_layer_ops, "losses": flip_losses}


def pending(tree, name):
    """Whether SET still has something to land (precision and losses land once; the layer
    ops whenever TFC_BACKEND_LAYER_OPS or a cpu_first flag holds something)."""
    gb = tree.get("src/gpu/gpu_backend.cu")
    if name == "precision":
        return ".round_bf16 = tfc_gpu_round_bf16," not in gb
    if name == "losses":
        return "be->losses = (1u << TFC_LOSS_COUNT) - 1;" not in gb
    return bool(layer_ops(tree) or flagged_layers(tree, strip=False))
HOOKS = ("tfc_gpu_test_enable_bf16", "tfc_gpu_test_enable_layer_ops")  # what writes gpu_ops


def finish(tree):
    """After the sets: the GPU's table is const once no test hook writes it."""
    gb = "src/gpu/gpu_backend.cu"
    left = [h for h in HOOKS if h + "(int on)\n{" in tree.get(gb)]
    sub(tree, gb, r"^static tfc_backend_ops gpu_ops = \{ /\* not const: [^*]*\*/\n",
        "static const tfc_backend_ops gpu_ops = {\n" if not left else
        "static tfc_backend_ops gpu_ops = { /* not const: %s */\n" % ", ".join(left))


def leftovers(tree):
    """Lines that still say a kernel or layer is held out: prose for a person to reword."""
    out = []
    for top in ("src", "docs", "README.md"):
        full = os.path.join(ROOT, top)
        paths = [top] if os.path.isfile(full) else [
            os.path.relpath(os.path.join(d, f), ROOT)
            for d, _, fs in os.walk(full) for f in fs if f.endswith((".c", ".h", ".cu", ".md"))]
        for p in sorted(paths):
            for i, line in enumerate(tree.get(p).split("\n"), 1):
                if re.search(r"CPU-first|cpu_first|[Nn]ot in the (GPU's op )?table|held out|"
                             r"tfc_gpu_test_enable_bf16|not yet run on a GPU|CPU only for now", line):
                    out.append(f"{p}:{i}: {line.strip()}")
    return out


# ---- the gating cases -------------------------------------------------------------------

def case_bodies(tree):
    """{case name: the text of its test function} from test_gpu_ops.c's op_cases[]."""
    text = tree.get(GPU_TESTS)
    table = text[text.index("op_cases[] = {") :]
    table = table[: table.index("{NULL, NULL}")]
    out = {}
    for name, fn in re.findall(r'\{"(\w+)", (\w+)\}', table):
        m = re.search(r"^static void " + fn + r"\(void\)\n\{\n(.*?)^\}\n", text, re.M | re.S)
        if not m:
            raise Anchor(f"{GPU_TESTS}: no function {fn} for case {name}")
        out[name] = m.group(1)
    return out


def cases(tree, name):
    """The test-gpu cases whose passing lands SET: those whose function turns its hook on (or
    lifts cpu_first, or sets the GPU's losses), and for the losses the op case `loss`."""
    marks = {"precision": [r"\benable_bf16\(1\)"],
             "layer-ops": [r"\benable_layer_ops\(1\)", r"\blift_cpu_first = 1"],
             "losses": [r"\bdev->losses = "]}[name]
    found = [c for c, body in case_bodies(tree).items()
             if any(re.search(m, body) for m in marks)]
    if name == "losses":
        found = ["loss"] + found
    if not found:
        raise Anchor(f"{GPU_TESTS}: no case gates the set {name}")
    return found


def coverage(tree):
    """Problems: a cpu_first layer no test-gpu case trains, an op held out without a GPU
    kernel."""
    problems, gpu_text = [], ""
    tests = tree.get(GPU_TESTS)
    for name in sorted(os.listdir(os.path.join(ROOT, "src/layers"))):
        if not name.endswith(".c"):
            continue
        text = tree.get("src/layers/" + name)
        for m in re.finditer(r"\{\s*\.type = \"(\w+)\"[^}]*?\.cpu_first = 1", text, re.S):
            if not re.search(r"\b" + m.group(1) + r"\b", tests):
                problems.append(f"src/layers/{name}: {m.group(1)} sets cpu_first but no case of "
                                f"{GPU_TESTS} names it")
    for name in sorted(os.listdir(os.path.join(ROOT, "src/gpu"))):
        if name.endswith(".cu"):
            gpu_text += tree.get("src/gpu/" + name)
    for op in layer_ops(tree):
        if not re.search(r"^(?:extern \"C\" )?\w[\w *]* tfc_gpu_" + op + r"\(", gpu_text, re.M):
            problems.append(f"src/core/backend.h: {op} (TFC_BACKEND_LAYER_OPS) has no GPU "
                            f"kernel tfc_gpu_{op} in src/gpu/*.cu")
    return problems


def main(argv):
    if len(argv) == 2 and argv[1] == "--sets":
        print(" ".join(n for n in SETS if pending(Tree(), n)))
        return 0
    if len(argv) == 3 and argv[1] == "--cases" and argv[2] in SETS:
        try:
            print(" ".join(cases(Tree(), argv[2])))
        except Anchor as e:
            print(f"gpu-flip: {e}", file=sys.stderr)
            return 1
        return 0
    if len(argv) == 2 and argv[1] == "--check":
        bad = 0
        for name, fn in SETS.items():
            tree = Tree()
            if not pending(tree, name):
                print(f"{name}: landed, nothing pending")
                continue
            try:
                gate = cases(tree, name)
                fn(tree)
                finish(tree)
                print(f"{name}: {len(tree.changed())} files; gated by {' '.join(gate)}")
            except Anchor as e:
                print(f"gpu-flip: {name}: {e}", file=sys.stderr)
                bad += 1
        for p in coverage(Tree()):
            print(f"gpu-flip: {p}", file=sys.stderr)
            bad += 1
        return 1 if bad else 0
    if len(argv) >= 3 and argv[1] == "--apply":
        args, out = argv[2:], None
        if args[0] == "--out" and len(args) >= 3:
            out, args = args[1], args[2:]
        if not all(a in SETS for a in args):
            print(f"gpu-flip: sets are {', '.join(SETS)}", file=sys.stderr)
            return 2
        tree = Tree()
        try:
            for a in args:
                SETS[a](tree)
            finish(tree)
        except Anchor as e:
            print(f"gpu-flip: {e} (nothing written)", file=sys.stderr)
            return 1
        for p in sorted(tree.changed()):
            with open(os.path.join(ROOT, p), "w") as f:
                f.write(tree.text[p])
            if out:
                os.makedirs(os.path.join(out, os.path.dirname(p)), exist_ok=True)
                shutil.copyfile(os.path.join(ROOT, p), os.path.join(out, p))
            print(f"gpu-flip: {p}")
        left = leftovers(tree)
        if left:
            print(f"gpu-flip: {len(left)} lines may still say so; reword them:")
            print("\n".join(left))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
