# ruff: noqa
# Near misses: accumulation with no_sync; a modulo that only logs; no DDP at all.
import contextlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(16):
    x, y = torch.randn(8, 4), torch.randint(2, (8,))
    last = (step + 1) % 4 == 0
    with contextlib.nullcontext() if last else model.no_sync():
        torch.nn.functional.cross_entropy(model(x), y).backward()
    if last:
        optimizer.step()
        optimizer.zero_grad()
