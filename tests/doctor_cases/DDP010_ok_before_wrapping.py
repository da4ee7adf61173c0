# ruff: noqa
# Near miss: the model is saved before the name is rebound to its DDP wrapper.
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = torch.nn.Linear(4, 2)
if dist.get_rank() == 0:
    torch.save(model.state_dict(), "initial.tmp")
    os.replace("initial.tmp", "initial.pt")
model = DDP(model)
