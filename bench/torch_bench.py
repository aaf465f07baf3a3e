"""PyTorch eager reference for `make bench` and `make bench-gpu`: the same networks as
bench/models/*.yaml (Keras mnist_mlp, mnist_cnn, Embedding-LSTM-Dense, and on request
ResNet-20), forward + loss + backward + SGD step per batch on random data, median of N steps
per repeat, one JSON line per model.

    torch_bench.py [THREADS] [--device cpu|cuda] [--tf32] [--steps N] [--compile]
                   [--models mnist_mlp,mnist_cnn,char_lstm,resnet20]

--compile wraps each model in torch.compile (inductor); its compilation happens during the
warm-up steps, which are not timed.

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
ap.add_argument("--steps", type=int, default=150)
ap.add_argument("--compile", action="store_true")
ap.add_argument("--models", default="mnist_mlp,mnist_cnn,char_lstm")
args = ap.parse_args()
torch.set_num_threads(args.threads)
DEV = torch.device(args.device)
CUDA = DEV.type == "cuda"
if CUDA:
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
STEPS, REPEATS, WARMUP = args.steps, 3, 20


class CharLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(80, 64)
        self.lstm = nn.LSTM(64, 256, batch_first=True)
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


def bench(name, model, x, y):
    model = model.to(DEV)
    x, y = x.to(DEV), y.to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()
    if args.compile:
        model = torch.compile(model)
    if CUDA:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    reps = []
    for _ in range(REPEATS):
        times = []
        for s in range(WARMUP + STEPS):
            t0 = time.perf_counter()
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
            if CUDA:
                torch.cuda.synchronize()
            if s >= WARMUP:
                times.append(time.perf_counter() - t0)
        times.sort()
        reps.append(1e3 * times[len(times) // 2])
    row = {"model": name, "torch": torch.__version__ + (" compile" if args.compile else ""),
           "device": args.device,
           "threads": torch.get_num_threads(), "ms": [round(r, 3) for r in reps]}
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
MODELS = {
    "mnist_mlp": lambda: (mlp(), torch.rand(128, 784), torch.randint(0, 10, (128,))),
    "mnist_cnn": lambda: (cnn(), torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,))),
    "char_lstm": lambda: (CharLSTM(), torch.randint(0, 80, (32, 64)),
                          torch.randint(0, 80, (32, 64))),
    "resnet20": lambda: (resnet20(), torch.rand(128, 3, 32, 32), torch.randint(0, 10, (128,))),
}
for name in args.models.split(","):
    bench(name, *MODELS[name]())
