"""PyTorch eager reference for `make bench`: the same three networks as bench/models/*.yaml
(Keras mnist_mlp, mnist_cnn, Embedding-LSTM-Dense), forward + loss + backward + SGD step
per batch on random data, median of N steps per repeat, one JSON line per model."""
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
STEPS, REPEATS, WARMUP = 150, 3, 20


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


def bench(name, model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model.train()
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
            if s >= WARMUP:
                times.append(time.perf_counter() - t0)
        times.sort()
        reps.append(1e3 * times[len(times) // 2])
    print(json.dumps({"model": name, "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "ms": [round(r, 3) for r in reps]}), flush=True)


torch.manual_seed(0)
bench("mnist_mlp", mlp(), torch.rand(128, 784), torch.randint(0, 10, (128,)))
bench("mnist_cnn", cnn(), torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,)))
bench("char_lstm", CharLSTM(), torch.randint(0, 80, (32, 64)), torch.randint(0, 80, (32, 64)))
