#!/usr/bin/env python3
"""A small CNN trained for 50 steps with a fixed seed, then one captured CUDA graph replayed.

Run natively and through `rgpuctl run`; tests/gpu/run.sh compares the two final losses
(within 1e-3 relative) and the median step times. Uses cuDNN convolutions, cuBLASLt matmuls,
the caching allocator, and torch.cuda.CUDAGraph (stream capture). Prints one JSON line last.
"""
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 8 * 8, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def main():
    steps = int(os.environ.get("STEPS", "50"))
    torch.manual_seed(1234)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda")
    # data made on the CPU from the seed, so both runs see the same bits
    xs = torch.randn(steps, 64, 3, 32, 32)
    ys = torch.randint(0, 10, (steps, 64))
    model = Net().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    # TRAIN_PROGRESS=1: a line "STEP i" before each step; TRAIN_PAUSE_MS: a sleep after each
    # (a run long enough to be migrated in the middle: tests/bench/live_bench.sh)
    progress = os.environ.get("TRAIN_PROGRESS") == "1"
    pause = float(os.environ.get("TRAIN_PAUSE_MS", "0")) / 1000
    times, losses, loss = [], [], None
    for i in range(steps):
        if progress:
            print(f"STEP {i}", flush=True)
        x, y = xs[i].to(dev, non_blocking=True), ys[i].to(dev, non_blocking=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
        if pause:
            time.sleep(pause)
    final = loss.item()

    # one inference pass captured as a CUDA graph and replayed; it must match eager mode
    model.eval()
    static_x = xs[0].to(dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        static_out = model(static_x)
    static_x.copy_(xs[1].to(dev))
    g.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        eager = model(xs[1].to(dev))
    graph_err = (static_out - eager).abs().max().item()

    times.sort()
    out = {
        "final_loss": final,
        "losses": losses,
        "step_ms_median": 1000 * times[len(times) // 2],
        "graph_max_abs_diff": graph_err,
        "graph_ok": graph_err < 1e-4,
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
    }
    print(json.dumps(out))
    return 0 if out["graph_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
