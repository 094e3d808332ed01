#!/usr/bin/env python3
"""A model split over two devices (issue 13): its first half on DEVS[0], its second on DEVS[1].

Each step moves the activations from the first device to the second and the gradients back
(tensor copies between devices), trains with SGD for STEPS steps (default 30) from a fixed seed,
in float32 and then in bf16 autocast. Prints every loss with all its digits, then one JSON line.
Run through rgpu with DEVS=0,1 on two servers, and natively with DEVS=0,0 (one device):
tests/gpu/run.sh compares the losses, which must be equal bit for bit (the same GPU does the
same arithmetic; a copy between devices changes no bit).
"""
import json
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def main():
    steps = int(os.environ.get("STEPS", "30"))
    d0, d1 = (torch.device(f"cuda:{i}") for i in os.environ.get("DEVS", "0,1").split(","))
    torch.manual_seed(4321)
    torch.use_deterministic_algorithms(True)
    first = nn.Sequential(nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 1024)).to(d0)
    second = nn.Sequential(nn.GELU(), nn.Linear(1024, 256), nn.GELU(), nn.Linear(256, 10)).to(d1)
    opt = torch.optim.SGD(list(first.parameters()) + list(second.parameters()), lr=0.05,
                          momentum=0.9)
    xs = torch.randn(steps, 128, 512)
    ys = torch.randint(0, 10, (steps, 128))
    losses = []
    for i in range(steps):
        bf16 = i >= steps // 2
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            h = first(xs[i].to(d0))
            out = second(h.to(d1))
            loss = F.cross_entropy(out.float(), ys[i].to(d1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        print(f"step {i} {'bf16' if bf16 else 'fp32'} loss {losses[-1]!r}", flush=True)
    # the parameters themselves, summed on the CPU: both halves, moved back
    psum = sum(float(p.detach().double().sum().cpu()) for p in
               list(first.parameters()) + list(second.parameters()))
    print(json.dumps({"devices": [str(d0), str(d1)], "final_loss": losses[-1],
                      "param_sum": psum, "steps": steps}))


if __name__ == "__main__":
    main()
