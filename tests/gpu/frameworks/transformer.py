#!/usr/bin/env python3
"""A small transformer trained in bf16 autocast with attention through
scaled_dot_product_attention, eagerly or (COMPILE=1) under torch.compile (Triton kernels).

Run natively and through `rgpuctl run`; tests/gpu/run.sh compares the printed losses (each
within 1e-3 relative of native). Output: one "loss STEP VALUE" line per 5 steps, then a
"result" line. Data comes from a seeded CPU generator so both runs see the same bits.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.ln2(x))


class LM(nn.Module):
    def __init__(self, vocab=512, d=256, heads=8, layers=4, ctx=128):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, ctx, d))
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx) + self.pos[:, : idx.shape[1]]
        return self.head(self.ln(self.blocks(x)))


def main():
    steps = int(os.environ.get("STEPS", "30"))
    torch.manual_seed(7)
    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(11)
    data = torch.randint(0, 512, (steps, 16, 129), generator=g)
    model = LM().to(dev)
    if os.environ.get("COMPILE") == "1":
        model = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for i in range(steps):
        batch = data[i].to(dev)
        x, y = batch[:, :-1], batch[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.float().reshape(-1, 512), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i % 5 == 4 or i == steps - 1:
            print(f"loss {i} {loss.item():.6f}", flush=True)
    print(f"result transformer{'_compile' if os.environ.get('COMPILE') == '1' else ''} "
          f"final {loss.item():.6f}", flush=True)


if __name__ == "__main__":
    main()
