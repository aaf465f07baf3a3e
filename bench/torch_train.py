"""PyTorch peer of `tfc-train configs/fashion_resnet.yaml`, end to end (issue 41's target:
tfc's seconds for the whole schedule against the fastest peer's): the same network
(configs/models/fashion_resnet.yaml: Keras's glorot_uniform kernels, BatchNormalization
with epsilon 1e-3 and momentum 0.99), the same data (Fashion-MNIST scaled by 1/255; the
training stream reshuffled each epoch and batched across epoch ends, as shuffle, repeat,
batch do; random 28x28 crops of the 2-pixel zero-padded image and horizontal flips with
probability 0.5, drawn on the device), the same update (SGD with Nesterov momentum in
Keras's form, v = m v - lr g, w += m v - lr g, with L2 weight decay added to the gradient),
the same rate (cosine to 0 over max_iter after a linear warm-up of 500 iterations), the
same weight average (every parameter and BatchNormalization statistic, decay
min(0.999, (1 + k) / (10 + k))) and the same test passes (every 2345 iterations and at the
end, on the average, batches of 1000). Its random streams are PyTorch's, so its accuracy is
another run's, not tfc's bits.

    torch_train.py [--device cpu|cuda] [--precision fp32|tf32|bf16] [--compile [MODE]]
                   [--data DIR] [--max-iter N] [--test-interval N] [--threads N]

--precision: fp32 is strict float32 (TF32 off in matmuls and cuDNN), tf32 allows it, bf16
runs the forward pass and the loss under torch.autocast(bfloat16) with the network and its
inputs channels_last (float32 weights, update and average). --compile wraps the network in
torch.compile (MODE default or reduce-overhead; the update and the average stay eager).
The loss is read back every 100 iterations (tfc's display interval). Prints one JSON line:
wall seconds of the whole run (data on the device, compilation and test passes included),
of the training steps alone, and the test accuracy of each pass."""
import argparse
import gzip
import json
import math
import os
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
ap.add_argument("--compile", nargs="?", const="default", default=None,
                choices=["default", "reduce-overhead"])
ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
ap.add_argument("--max-iter", type=int, default=14070)
ap.add_argument("--test-interval", type=int, default=2345)
ap.add_argument("--threads", type=int, default=0)
ap.add_argument("--seed", type=int, default=1)
args = ap.parse_args()
if args.threads > 0:
    torch.set_num_threads(args.threads)
DEV = torch.device(args.device)
CUDA = DEV.type == "cuda"
if CUDA:
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
BF16 = args.precision == "bf16"
BATCH, LR, MOMENTUM, WD, WARMUP, DECAY = 128, 0.1, 0.9, 5e-4, 500, 0.999
torch.manual_seed(args.seed)


def sync():
    if CUDA:
        torch.cuda.synchronize()


def idx(name):
    """An IDX file (gzip) as a uint8 tensor of its shape."""
    data = gzip.open(os.path.join(args.data, name)).read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def glorot(m):
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.xavier_uniform_(m.weight)
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def conv_bn(cin, cout, stride=1, k=3):
    return [nn.Conv2d(cin, cout, k, stride, k // 2 if stride == 1 else 0, bias=False),
            nn.BatchNorm2d(cout, eps=1e-3, momentum=0.01)]


class Same(nn.Module):
    """TensorFlow's SAME padding for a stride-2 3x3 convolution: one row and column after."""

    def forward(self, x):
        return F.pad(x, (0, 1, 0, 1))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        first = conv_bn(cin, cout, stride)
        self.a = nn.Sequential(*([Same()] if stride == 2 else []), *first, nn.ReLU(),
                               *conv_bn(cout, cout))
        self.proj = (nn.Sequential(*conv_bn(cin, cout, stride, k=1)) if stride == 2 else
                     nn.Identity())

    def forward(self, x):
        return F.relu(self.a(x) + self.proj(x))


class FashionResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(*conv_bn(1, 32), nn.ReLU())
        self.blocks = nn.Sequential(Block(32, 32, 1), Block(32, 32, 1), Block(32, 64, 2),
                                    Block(64, 64, 1), Block(64, 128, 2), Block(128, 128, 1))
        self.out = nn.Linear(128, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.out(x.mean((2, 3)))


def lr_at(it):
    """cosine (alpha 0) over max_iter, times the warm-up min(1, (it + 1) / 500)."""
    t = min(it, args.max_iter) / args.max_iter
    return LR * 0.5 * (1 + math.cos(math.pi * t)) * min(1.0, (it + 1) / WARMUP)


t_start = time.perf_counter()
train_x = (idx("train-images-idx3-ubyte.gz").to(DEV).float() * 0.00392156862745098)[:, None]
train_y = idx("train-labels-idx1-ubyte.gz").to(DEV).long()
test_x = (idx("t10k-images-idx3-ubyte.gz").to(DEV).float() * 0.00392156862745098)[:, None]
test_y = idx("t10k-labels-idx1-ubyte.gz").to(DEV).long()
N = train_x.shape[0]
fmt = torch.channels_last if BF16 else torch.contiguous_format

model = FashionResNet()
model.apply(glorot)
model = model.to(DEV, memory_format=fmt)
avg = FashionResNet().to(DEV, memory_format=fmt).eval()  # the weight average, for tests
params = list(model.parameters())
TFC_PARAMS = 696042  # tfc-summary configs/models/fashion_resnet.yaml: trainable params
if sum(p.numel() for p in params) != TFC_PARAMS:
    raise SystemExit(f"torch_train.py: {sum(p.numel() for p in params)} trainable parameters, "
                     f"tfc's fashion_resnet has {TFC_PARAMS}: not the same network")
state = [t for t in model.state_dict().values() if t.is_floating_point()]
avg_state = [t for t in avg.state_dict().values() if t.is_floating_point()]
velocity = [torch.zeros_like(p) for p in params]
step_fn = torch.compile(model, mode=args.compile) if args.compile else model
gen = torch.Generator(device=DEV)
gen.manual_seed(args.seed)
rows = torch.arange(28, device=DEV)


def batches():
    """Index batches of the reshuffled-every-epoch stream, across epoch ends."""
    order, at = torch.randperm(N, device=DEV, generator=gen), 0
    while True:
        take = order[at:at + BATCH]
        at += take.numel()
        while take.numel() < BATCH:
            order, at = torch.randperm(N, device=DEV, generator=gen), 0
            more = order[:BATCH - take.numel()]
            at = more.numel()
            take = torch.cat([take, more])
        yield take


def augment(x):
    """Random 28x28 crops of the 2-pixel zero-padded images, then flips with p 0.5."""
    b = x.shape[0]
    padded = F.pad(x, (2, 2, 2, 2))
    oy = torch.randint(0, 5, (b, 1), device=DEV, generator=gen) + rows
    ox = torch.randint(0, 5, (b, 1), device=DEV, generator=gen) + rows
    crop = padded[torch.arange(b, device=DEV)[:, None, None], 0, oy[:, :, None], ox[:, None, :]]
    flip = torch.rand(b, device=DEV, generator=gen) < 0.5
    crop = torch.where(flip[:, None, None], crop.flip(-1), crop)
    return crop[:, None].contiguous(memory_format=fmt)


@torch.no_grad()
def test_accuracy():
    right = 0
    for i in range(0, test_x.shape[0], 1000):
        x = test_x[i:i + 1000].contiguous(memory_format=fmt)
        with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=BF16):
            right += (avg(x).argmax(1) == test_y[i:i + 1000]).sum().item()
    return right / test_x.shape[0]


@torch.no_grad()
def update(it):
    lr = lr_at(it)
    grads = [p.grad for p in params]
    torch._foreach_add_(grads, params, alpha=WD)       # g += wd w
    torch._foreach_mul_(velocity, MOMENTUM)            # v = m v - lr g
    torch._foreach_add_(velocity, grads, alpha=-lr)
    torch._foreach_add_(params, velocity, alpha=MOMENTUM)  # w += m v - lr g
    torch._foreach_add_(params, grads, alpha=-lr)
    d = min(DECAY, (1 + it) / (10 + it))               # the average, its first update a copy
    torch._foreach_lerp_(avg_state, state, 1.0 if it == 0 else 1 - d)


sync()
t_data = time.perf_counter() - t_start
accuracies, train_seconds, losses = [], 0.0, []
stream = batches()
t0 = time.perf_counter()
for it in range(args.max_iter):
    take = next(stream)
    x, y = augment(train_x[take]), train_y[take]
    for p in params:
        p.grad = None
    with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=BF16):
        loss = F.cross_entropy(step_fn(x), y)
    loss.backward()
    update(it)
    if (it + 1) % 100 == 0:
        losses.append(loss.item())
    done = it + 1
    if done % args.test_interval == 0 or done == args.max_iter:
        sync()
        train_seconds += time.perf_counter() - t0
        accuracies.append(test_accuracy())
        t0 = time.perf_counter()
sync()
total = time.perf_counter() - t_start
name = "torch.compile " + args.compile if args.compile else "torch eager"
print(json.dumps({"peer": name, "device": args.device, "precision": args.precision,
                  "iterations": args.max_iter, "seconds": round(total, 3),
                  "train_seconds": round(train_seconds, 3), "data_seconds": round(t_data, 3),
                  "test_accuracy": accuracies, "last_loss": losses[-1] if losses else None,
                  "params": sum(p.numel() for p in params),
                  "gpu": torch.cuda.get_device_name() if CUDA else ""}))
