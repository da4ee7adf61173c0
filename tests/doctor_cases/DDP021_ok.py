# ruff: noqa
# Near misses: consolidated on every rank first, then saved by rank 0; and a plain optimizer's state_dict().
import os

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer

dist.init_process_group("gloo")
model = torch.nn.Linear(4, 2)
optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
plain = torch.optim.SGD(model.parameters(), lr=0.1)
optimizer.consolidate_state_dict(to=0)
if dist.get_rank() == 0:
    torch.save({"optimizer": optimizer.state_dict(), "plain": plain.state_dict()}, "ckpt.tmp")
    os.replace("ckpt.tmp", "ckpt.pt")
