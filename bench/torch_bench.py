"""PyTorch eager reference for `make bench`, `make bench-peers` and `make bench-gpu`: the same
networks as bench/models/*.yaml (Keras mnist_mlp, mnist_cnn, Embedding-LSTM-Dense, and on
request ResNet-20, the Bidirectional-GRU and Conv1D text classifiers, the fortunes GPT at
T = 128, 512 and 2048, the MobileNet), forward + loss + backward + SGD step per batch on random
data, median of N steps per repeat, one JSON line per model with its trainable parameter
count (checked against tfc's: a mismatch stops the script) and the loss of its first step.

    torch_bench.py [THREADS] [--device cpu|cuda] [--tf32] [--bf16] [--steps N] [--warmup N]
                   [--repeats N] [--compile [MODE]] [--models mnist_mlp,mnist_cnn,...]

--compile wraps each model in torch.compile (inductor; MODE "default" or "reduce-overhead",
whose CUDA graphs are marked a new step at each step's start, and whose gradients are set
to None rather than zeroed, as the graphs' memory requires); its compilation happens
during the warm-up steps, which are not timed.

--bf16 runs the forward pass and the loss under torch.autocast(bfloat16) (float32 weights,
SGD and gradients as autocast keeps them) with the 4-D inputs and the networks in
channels_last, as a speed-minded PyTorch user trains in bf16 (issue 41's peer).

On CUDA every step ends with torch.cuda.synchronize() (tfc's steps end with a sync too),
the peak of torch.cuda.max_memory_reserved/allocated is reported, and TF32 is off in both
matmuls and cuDNN unless --tf32 (PyTorch's own default allows it in convolutions only)."""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("threads", nargs="?", type=int, default=2)
ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
ap.add_argument("--tf32", action="store_true")
ap.add_argument("--bf16", action="store_true")
ap.add_argument("--steps", type=int, default=150)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--compile", nargs="?", const="default", default=None,
                choices=["default", "reduce-overhead"])
ap.add_argument("--models", default="mnist_mlp,mnist_cnn,char_lstm")
args = ap.parse_args()
torch.set_num_threads(args.threads)
DEV = torch.device(args.device)
CUDA = DEV.type == "cuda"
if CUDA:
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
STEPS, REPEATS, WARMUP = args.steps, args.repeats, args.warmup


class CharLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(80, 64)
        self.lstm = nn.LSTM(64, 256, batch_first=True)
        # Keras's LSTM has one bias, PyTorch's two: the second stays zero and untrained
        nn.init.zeros_(self.lstm.bias_hh_l0)
        self.lstm.bias_hh_l0.requires_grad_(False)
        self.out = nn.Linear(256, 80)

    def forward(self, x):
        h, _ = self.lstm(self.emb(x))
        return self.out(h)


def mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 512),
                         nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
                         nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10))


class Block(nn.Module):
    """ResNet basic block: conv-BN-ReLU-conv-BN plus the shortcut (a 1x1 projection with
    BN where the shape changes, option B), then ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.proj = None
        if stride != 1 or cin != cout:
            self.proj = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        h = self.b2(self.c2(h))
        return F.relu(h + (self.proj(x) if self.proj is not None else x))


def resnet20():
    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for b in range(3):
            layers.append(Block(cin, cout, stride if b == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


class BiGRU(nn.Module):
    """bench/models/bigru.yaml: Embedding -> Bidirectional GRU (PyTorch's GRU is Keras's
    reset_after form, two biases per direction) -> mean over the steps -> Dense(8)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8000, 64)
        self.gru = nn.GRU(64, 48, batch_first=True, bidirectional=True)
        self.out = nn.Linear(96, 8)

    def forward(self, x):
        h, _ = self.gru(self.emb(x))
        return self.out(h.mean(1))


class Conv1DStack(nn.Module):
    """bench/models/conv1d.yaml: Embedding -> 3 x Conv1D(128, 5, same, relu) ->
    GlobalMaxPooling1D -> Dense(8); channels first, as PyTorch's Conv1d wants."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(8000, 64)
        self.convs = nn.ModuleList(nn.Conv1d(c, 128, 5, padding=2) for c in (64, 128, 128))
        self.out = nn.Linear(128, 8)

    def forward(self, x):
        h = self.emb(x).transpose(1, 2)
        for conv in self.convs:
            h = F.relu(conv(h))
        return self.out(h.amax(2))


class GPTBlock(nn.Module):
    """Pre-norm block of bench/models/gpt_t*.yaml: LayerNormalization (Keras's epsilon 1e-3)
    -> causal self-attention (4 heads of 32, scaled_dot_product_attention) -> Add ->
    LayerNormalization -> Dense(512, gelu) -> Dense(128) -> Add."""

    def __init__(self, d=128, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d, eps=1e-3), nn.LayerNorm(d, eps=1e-3)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ff1, self.ff2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = (p(h).view(b, t, self.heads, -1).transpose(1, 2) for p in (self.q, self.k,
                                                                              self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff2(F.gelu(self.ff1(self.norm2(x))))


class GPT(nn.Module):
    """bench/models/gpt_t*.yaml: token and position embeddings, 4 blocks, a final
    LayerNormalization and logits over 128 ids at every step."""

    def __init__(self, t, vocab=128, d=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(t, d) * 0.02)
        self.blocks = nn.Sequential(*(GPTBlock(d) for _ in range(4)))
        self.norm = nn.LayerNorm(d, eps=1e-3)
        self.logits = nn.Linear(d, vocab)

    def forward(self, x):
        return self.logits(self.norm(self.blocks(self.tok(x) + self.pos)))


def bn(c):
    return nn.BatchNorm2d(c, eps=1e-3, momentum=0.01)  # Keras's epsilon and momentum 0.99


class InvertedResidual(nn.Module):
    """One block of bench/models/mobilenet.yaml: [1x1 expansion, BN, relu6], 3x3 depthwise,
    BN, relu6, [squeeze-and-excitation: mean, Dense-relu, Dense-hard_sigmoid, Multiply],
    1x1 linear projection, BN, and an Add where the shapes match."""

    def __init__(self, cin, expand, cout, stride, se):
        super().__init__()
        c = cin * expand
        self.expand = nn.Sequential(nn.Conv2d(cin, c, 1, bias=False), bn(c),
                                    nn.ReLU6()) if expand > 1 else nn.Identity()
        self.dw = nn.Sequential(nn.Conv2d(c, c, 3, stride, 1, groups=c, bias=False), bn(c),
                                nn.ReLU6())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, se),
                                nn.ReLU(), nn.Linear(se, c), nn.Hardsigmoid()) if se else None
        self.project = nn.Sequential(nn.Conv2d(c, cout, 1, bias=False), bn(cout))
        self.add = stride == 1 and cin == cout

    def forward(self, x):
        h = self.dw(self.expand(x))
        if self.se is not None:
            h = h * self.se(h)[:, :, None, None]
        h = self.project(h)
        return h + x if self.add else h


def mobilenet():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), bn(16), nn.ReLU6(),
                         InvertedResidual(16, 1, 16, 1, 0), InvertedResidual(16, 4, 24, 2, 0),
                         InvertedResidual(24, 4, 24, 1, 0), InvertedResidual(24, 4, 48, 2, 24),
                         InvertedResidual(48, 4, 48, 1, 48), nn.Conv2d(48, 192, 1, bias=False),
                         bn(192), nn.ReLU6(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(0.2), nn.Linear(192, 10))


def bench(name, model, x, y):
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert params == PARAMS[name], f"{name}: {params} parameters, tfc's copy has {PARAMS[name]}"
    model = model.to(DEV)
    x, y = x.to(DEV), y.to(DEV)
    if args.bf16 and x.dim() == 4:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()
    graphs = args.compile == "reduce-overhead"
    if args.compile:
        model = torch.compile(model, mode=args.compile)
    if CUDA:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    reps, loss0 = [], None
    for _ in range(REPEATS):
        times = []
        for s in range(WARMUP + STEPS):
            t0 = time.perf_counter()
            if graphs:
                torch.compiler.cudagraph_mark_step_begin()
            with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=args.bf16):
                out = model(x)
                loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            # under CUDA graphs the gradients live in the graph's memory, which the next
            # replay overwrites: they are set to None (a fresh tensor each step), not zeroed
            opt.zero_grad(set_to_none=graphs)
            loss.backward()
            opt.step()
            if loss0 is None:
                loss0 = loss.item()
            if CUDA:
                torch.cuda.synchronize()
            if s >= WARMUP:
                times.append(time.perf_counter() - t0)
        times.sort()
        reps.append(1e3 * times[len(times) // 2])
    row = {"model": name,
           "torch": torch.__version__ + (f" compile {args.compile}" if args.compile else ""),
           "device": args.device,
           "threads": torch.get_num_threads(), "params": params, "loss0": round(loss0, 4),
           "ms": [round(r, 3) for r in reps], "precision": "bf16" if args.bf16 else "float32"}
    if CUDA:
        row["peak_mib"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
        row["peak_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        row["tf32"] = int(args.tf32)
        row["gpu"] = torch.cuda.get_device_name()
    print(json.dumps(row), flush=True)
    del model, opt
    if CUDA:
        torch.cuda.empty_cache()


torch.manual_seed(0)
# tfc's trainable parameter counts of bench/models/*.yaml (bench_train's "params")
PARAMS = {"mnist_mlp": 669706, "mnist_cnn": 1199882, "char_lstm": 354384, "resnet20": 272474,
          "bigru": 545608, "conv1d": 718216, "gpt_t128": 842624, "gpt_t512": 891776, "gpt_t2048": 1088384,
          "mobilenet": 74194}
MODELS = {
    "mnist_mlp": lambda: (mlp(), torch.rand(128, 784), torch.randint(0, 10, (128,))),
    "mnist_cnn": lambda: (cnn(), torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,))),
    "char_lstm": lambda: (CharLSTM(), torch.randint(0, 80, (32, 64)),
                          torch.randint(0, 80, (32, 64))),
    "resnet20": lambda: (resnet20(), torch.rand(128, 3, 32, 32), torch.randint(0, 10, (128,))),
    "bigru": lambda: (BiGRU(), torch.randint(0, 8000, (32, 64)), torch.randint(0, 8, (32,))),
    "conv1d": lambda: (Conv1DStack(), torch.randint(0, 8000, (32, 64)),
                       torch.randint(0, 8, (32,))),
    "gpt_t128": lambda: (GPT(128), torch.randint(0, 128, (32, 128)),
                         torch.randint(0, 128, (32, 128))),
    "gpt_t512": lambda: (GPT(512), torch.randint(0, 128, (8, 512)),
                         torch.randint(0, 128, (8, 512))),
    "gpt_t2048": lambda: (GPT(2048), torch.randint(0, 128, (2, 2048)),
                          torch.randint(0, 128, (2, 2048))),
    "mobilenet": lambda: (mobilenet(), torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,))),
}
# gpt_tN for any other T: batches of 4096 tokens (one sequence from T = 4096 on), the
# position table's T x 128 more parameters; running out of GPU memory prints a row with
# "oom" (for the T at which each peer runs out, issue 40) instead of stopping the script
for name in args.models.split(","):
    if name not in MODELS and name.startswith("gpt_t") and name[5:].isdigit():
        T = int(name[5:])
        B = max(1, 4096 // T)
        PARAMS[name] = 842624 + 128 * (T - 128)
        MODELS[name] = lambda T=T, B=B: (GPT(T), torch.randint(0, 128, (B, T)),
                                         torch.randint(0, 128, (B, T)))
    try:
        bench(name, *MODELS[name]())
    except torch.cuda.OutOfMemoryError as e:
        print(json.dumps({"model": name, "device": args.device, "oom": 1,
                          "error": str(e).splitlines()[0][:200]}), flush=True)
        torch.cuda.empty_cache()
