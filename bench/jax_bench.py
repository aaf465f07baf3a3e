"""JAX reference for `make bench-gpu`: the networks of bench/models/{mnist_mlp,mnist_cnn,
char_lstm,resnet20}.yaml (and on request gpt_t128, gpt_t512, gpt_t2048, or gpt_tN for any T:
batches of 4096 tokens, one sequence from T = 4096 on) in plain jax.numpy
(channels last, as tfc), forward + loss + backward
+ SGD (lr 0.01, as torch_bench.py) in one jax.jit per step with the parameters donated, on
random data; each step ends with block_until_ready. Strict float32 unless --tf32
(jax_default_matmul_precision "highest", else "tensorfloat32"). --bf16: the step casts the
float32 parameters and inputs to bfloat16 for the forward pass (mixed precision: float32
weights, their gradients and SGD; the logits, the loss and the normalisations' statistics in
float32). BatchNormalization uses the batch's statistics (training mode) and keeps no
moving averages. Median of N steps per
repeat, one JSON line per model (bench_gpu.sh reads "model" and "ms"), the trainable
parameter count checked against tfc's.

    jax_bench.py [--tf32] [--bf16] [--steps N] [--warmup N] [--repeats N] [--models a,b,...]"""
import argparse
import json
import time

import jax
import jax.numpy as jnp

ap = argparse.ArgumentParser()
ap.add_argument("--tf32", action="store_true")
ap.add_argument("--bf16", action="store_true")
ap.add_argument("--steps", type=int, default=150)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--models", default="mnist_mlp,mnist_cnn,char_lstm,resnet20")
args = ap.parse_args()
jax.config.update("jax_default_matmul_precision", "tensorfloat32" if args.tf32 else "highest")

# tfc's trainable parameter counts (bench_train's "params", torch_bench.py's PARAMS)
PARAMS = {"mnist_mlp": 669706, "mnist_cnn": 1199882, "char_lstm": 354384, "resnet20": 272474,
          "gpt_t128": 842624, "gpt_t512": 891776, "gpt_t2048": 1088384}
KEY = [jax.random.PRNGKey(0)]


def rand(*shape, scale=None):
    KEY[0], k = jax.random.split(KEY[0])
    fan_in = 1
    for d in shape[:-1]:
        fan_in *= d
    return jax.random.normal(k, shape, jnp.float32) * (scale or (2.0 / fan_in) ** 0.5)


def dense(n_in, n_out):
    return {"w": rand(n_in, n_out), "b": jnp.zeros(n_out)}


def dropout(x, rate, key):
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def conv(x, w, stride=1, pad=0):
    return jax.lax.conv_general_dilated(x, w, (stride, stride), ((pad, pad), (pad, pad)),
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))


def mlp():
    p = {"d1": dense(784, 512), "d2": dense(512, 512), "d3": dense(512, 10)}

    def f(p, x, key):
        k1, k2 = jax.random.split(key)
        h = dropout(jax.nn.relu(x @ p["d1"]["w"] + p["d1"]["b"]), 0.2, k1)
        h = dropout(jax.nn.relu(h @ p["d2"]["w"] + p["d2"]["b"]), 0.2, k2)
        return h @ p["d3"]["w"] + p["d3"]["b"]
    return p, f


def cnn():
    p = {"c1": {"w": rand(3, 3, 1, 32), "b": jnp.zeros(32)},
         "c2": {"w": rand(3, 3, 32, 64), "b": jnp.zeros(64)},
         "d1": dense(9216, 128), "d2": dense(128, 10)}

    def f(p, x, key):
        k1, k2 = jax.random.split(key)
        h = jax.nn.relu(conv(x, p["c1"]["w"]) + p["c1"]["b"])
        h = jax.nn.relu(conv(h, p["c2"]["w"]) + p["c2"]["b"])
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        h = dropout(h, 0.25, k1).reshape(h.shape[0], -1)
        h = dropout(jax.nn.relu(h @ p["d1"]["w"] + p["d1"]["b"]), 0.5, k2)
        return h @ p["d2"]["w"] + p["d2"]["b"]
    return p, f


def char_lstm():
    p = {"emb": rand(80, 64, scale=0.05), "k": rand(64, 1024), "r": rand(256, 1024),
         "b": jnp.zeros(1024), "out": dense(256, 80)}

    def f(p, x, key):
        e = p["emb"][x]                                   # [N, T, 64]
        xk = jnp.einsum("ntc,cg->tng", e, p["k"]) + p["b"]  # all steps' input part at once

        def cell(carry, g_x):
            h, c = carry
            g = g_x + h @ p["r"]
            i, fg, gg, o = jnp.split(g, 4, axis=-1)
            c = jax.nn.sigmoid(fg) * c + jax.nn.sigmoid(i) * jnp.tanh(gg)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        z = jnp.zeros((x.shape[0], 256), xk.dtype)
        _, hs = jax.lax.scan(cell, (z, z), xk)            # [T, N, 256]
        return jnp.swapaxes(hs, 0, 1) @ p["out"]["w"] + p["out"]["b"]
    return p, f


def bn_params(c):
    return {"g": jnp.ones(c), "b": jnp.zeros(c)}


def bn(x, q):
    xf = x.astype(jnp.float32)  # the statistics in float32 also under --bf16
    m = xf.mean((0, 1, 2))
    v = ((xf - m) ** 2).mean((0, 1, 2))
    return ((xf - m) * jax.lax.rsqrt(v + 1e-3) * q["g"] + q["b"]).astype(x.dtype)


def resnet20():
    p = {"c0": rand(3, 3, 3, 16), "b0": bn_params(16), "blocks": []}
    plan, cin = [], 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for k in range(3):
            s = stride if k == 0 else 1
            b = {"c1": rand(3, 3, cin, cout), "b1": bn_params(cout),
                 "c2": rand(3, 3, cout, cout), "b2": bn_params(cout)}
            if s != 1 or cin != cout:
                b["pc"], b["pb"] = rand(1, 1, cin, cout), bn_params(cout)
            p["blocks"].append(b)
            plan.append(s)
            cin = cout
    p["out"] = dense(64, 10)

    def f(p, x, key):
        h = jax.nn.relu(bn(conv(x, p["c0"], 1, 1), p["b0"]))
        for b, s in zip(p["blocks"], plan):
            y = jax.nn.relu(bn(conv(h, b["c1"], s, 1), b["b1"]))
            y = bn(conv(y, b["c2"], 1, 1), b["b2"])
            sc = bn(conv(h, b["pc"], s, 0), b["pb"]) if "pc" in b else h
            h = jax.nn.relu(y + sc)
        return h.mean((1, 2)) @ p["out"]["w"] + p["out"]["b"]
    return p, f


def layer_norm(x, q):
    xf = x.astype(jnp.float32)  # as bn
    m = xf.mean(-1, keepdims=True)
    v = ((xf - m) ** 2).mean(-1, keepdims=True)
    return ((xf - m) * jax.lax.rsqrt(v + 1e-3) * q["g"] + q["b"]).astype(x.dtype)


def gpt(t):
    """bench/models/gpt_t*.yaml: token and position embeddings, 4 pre-norm blocks of causal
    self-attention (4 heads of 32, jax.nn.dot_product_attention: XLA's own attention in
    float32) and a gelu feed-forward (512), a final LayerNormalization, logits over 128."""
    def ln():
        return {"g": jnp.ones(128), "b": jnp.zeros(128)}
    p = {"tok": rand(128, 128, scale=0.05), "pos": rand(t, 128, scale=0.02), "norm": ln(),
         "logits": dense(128, 128),
         "blocks": [{"n1": ln(), "q": dense(128, 128), "k": dense(128, 128),
                     "v": dense(128, 128), "o": dense(128, 128), "n2": ln(),
                     "f1": dense(128, 512), "f2": dense(512, 128)} for _ in range(4)]}

    def f(p, x, key):
        h = p["tok"][x] + p["pos"]                        # [N, T, 128]
        n = x.shape[0]
        for b in p["blocks"]:
            a = layer_norm(h, b["n1"])
            q, k, v = ((a @ b[w]["w"] + b[w]["b"]).reshape(n, t, 4, 32) for w in "qkv")
            o = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(n, t, 128)
            h = h + o @ b["o"]["w"] + b["o"]["b"]
            a = jax.nn.gelu(layer_norm(h, b["n2"]) @ b["f1"]["w"] + b["f1"]["b"],
                            approximate=False)
            h = h + a @ b["f2"]["w"] + b["f2"]["b"]
        return layer_norm(h, p["norm"]) @ p["logits"]["w"] + p["logits"]["b"]
    return p, f


# the GPTs' batches: 4096 tokens each (bench_train's batch_of)
GPT_BATCH = {"gpt_t128": 32, "gpt_t512": 8, "gpt_t2048": 2}


def data(name):
    k1, k2 = jax.random.split(jax.random.PRNGKey(1))
    if name.startswith("gpt_t"):
        T = int(name[5:])
        shape = (GPT_BATCH.get(name, max(1, 4096 // T)), T)
        return jax.random.randint(k1, shape, 0, 128), jax.random.randint(k2, shape, 0, 128)
    if name == "mnist_mlp":
        return jax.random.uniform(k1, (128, 784)), jax.random.randint(k2, (128,), 0, 10)
    if name == "mnist_cnn":
        return jax.random.uniform(k1, (128, 28, 28, 1)), jax.random.randint(k2, (128,), 0, 10)
    if name == "char_lstm":
        return (jax.random.randint(k1, (32, 64), 0, 80),
                jax.random.randint(k2, (32, 64), 0, 80))
    return jax.random.uniform(k1, (128, 32, 32, 3)), jax.random.randint(k2, (128,), 0, 10)


def bench(name, make):
    params, f = make()
    n = sum(a.size for a in jax.tree_util.tree_leaves(params))
    assert n == PARAMS[name], f"{name}: {n} parameters, tfc's copy has {PARAMS[name]}"
    x, y = data(name)

    def loss_fn(p, x, y, key):
        if args.bf16:
            p = jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16), p)
            if jnp.issubdtype(x.dtype, jnp.floating):
                x = x.astype(jnp.bfloat16)
        logits = f(p, x, key).astype(jnp.float32).reshape(-1, CLASSES.get(name, 10))
        logp = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(logp, y.reshape(-1, 1), axis=1).mean()

    def sgd_step(p, key, x, y):
        # the dropout key is split on the device: nothing but the step is dispatched
        key, sub = jax.random.split(key)
        loss, g = jax.value_and_grad(loss_fn)(p, x, y, sub)
        return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), key, loss
    step = jax.jit(sgd_step, donate_argnums=(0, 1))
    key = jax.random.PRNGKey(2)
    reps, loss0 = [], None
    for _ in range(args.repeats):
        times = []
        for s in range(args.warmup + args.steps):
            t0 = time.perf_counter()
            params, key, loss = step(params, key, x, y)
            loss.block_until_ready()
            if loss0 is None:
                loss0 = float(loss)
            if s >= args.warmup:
                times.append(time.perf_counter() - t0)
        times.sort()
        reps.append(1e3 * times[len(times) // 2])
    print(json.dumps({"model": name, "jax": jax.__version__, "params": n,
                      "loss0": round(loss0, 4), "ms": [round(r, 3) for r in reps],
                      "tf32": int(args.tf32), "precision": "bf16" if args.bf16 else "float32",
                      "gpu": jax.devices()[0].device_kind}), flush=True)


CLASSES = {"char_lstm": 80, "gpt_t128": 128, "gpt_t512": 128, "gpt_t2048": 128}
MODELS = {"mnist_mlp": mlp, "mnist_cnn": cnn, "char_lstm": char_lstm, "resnet20": resnet20,
          "gpt_t128": lambda: gpt(128), "gpt_t512": lambda: gpt(512),
          "gpt_t2048": lambda: gpt(2048)}
# gpt_tN for any other T (its position table T x 128 more parameters); running out of device
# memory prints a row with "oom" (the T at which each peer runs out, issue 40) and goes on
for name in args.models.split(","):
    if name not in MODELS and name.startswith("gpt_t") and name[5:].isdigit():
        T = int(name[5:])
        PARAMS[name] = 842624 + 128 * (T - 128)
        CLASSES[name] = 128
        MODELS[name] = lambda T=T: gpt(T)
    try:
        bench(name, MODELS[name])
    except Exception as e:  # XlaRuntimeError: RESOURCE_EXHAUSTED
        if "RESOURCE_EXHAUSTED" not in str(e) and "out of memory" not in str(e).lower():
            raise
        print(json.dumps({"model": name, "oom": 1, "error": str(e).splitlines()[0][:200]}),
              flush=True)
