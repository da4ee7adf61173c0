# ruff: noqa
# Near misses: .module.state_dict(), the unwrapped model, a DDP state_dict compared but not saved.
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
model = torch.nn.Linear(4, 2)
ddp_model = DistributedDataParallel(model)
same = all(torch.equal(a, b) for a, b in zip(ddp_model.state_dict().values(), model.state_dict().values()))
if dist.get_rank() == 0:
    torch.save(ddp_model.module.state_dict(), "weights.tmp")
    os.replace("weights.tmp", "weights.pt")
    torch.save({"model": model.state_dict()}, "checkpoint.tmp")
    os.replace("checkpoint.tmp", "checkpoint.pt")
