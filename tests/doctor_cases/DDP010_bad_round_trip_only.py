# ruff: noqa
# The checkpoint goes back into the DDP model, but it is the only file the script writes: a model without
# DDP (evaluation, export) meets the 'module.' keys.
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
model = DistributedDataParallel(torch.nn.Linear(4, 2))
if os.path.exists("checkpoint.pt"):
    model.load_state_dict(torch.load("checkpoint.pt", map_location="cpu", weights_only=True)["model"])
if dist.get_rank() == 0:
    torch.save({"model": model.state_dict()}, "checkpoint.tmp")  # expect: DDP010
    os.replace("checkpoint.tmp", "checkpoint.pt")
