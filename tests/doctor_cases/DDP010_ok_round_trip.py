# ruff: noqa
# Near miss: a resume checkpoint of the DDP model, loaded back into the DDP model by the same script: the
# 'module.' keys go out and come back, and the weights for use without DDP are saved unwrapped.
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
model = DistributedDataParallel(torch.nn.Linear(4, 2))
if os.path.exists("checkpoint.pt"):
    model.load_state_dict(torch.load("checkpoint.pt", map_location="cpu", weights_only=True)["model"])
if dist.get_rank() == 0:
    torch.save({"model": model.state_dict()}, "checkpoint.tmp")
    os.replace("checkpoint.tmp", "checkpoint.pt")
    torch.save(model.module.state_dict(), "final.tmp")  # the weights for use without DDP, unwrapped
    os.replace("final.tmp", "final.pt")
