# ruff: noqa
# ZeRO-1's optimizer saved as if it held the whole state: state_dict() raises on every rank.
import os

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer

dist.init_process_group("gloo")
model = torch.nn.Linear(4, 2)
optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
if dist.get_rank() == 0:
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "ckpt.tmp")  # expect: DDP021
    os.replace("ckpt.tmp", "ckpt.pt")
