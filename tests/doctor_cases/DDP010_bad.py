# ruff: noqa
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
model = torch.nn.Linear(4, 2)
ddp_model = DistributedDataParallel(model)
if dist.get_rank() == 0:
    torch.save(ddp_model.state_dict(), "weights.tmp")  # expect: DDP010
    os.replace("weights.tmp", "weights.pt")
    checkpoint = {"model": ddp_model.state_dict(), "epoch": 1}  # expect: DDP010
    torch.save(checkpoint, "checkpoint.tmp")
    os.replace("checkpoint.tmp", "checkpoint.pt")
