# ruff: noqa
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
model = torch.nn.Linear(4, 4).cuda()
state = torch.load("checkpoint.pt", weights_only=True)  # expect: DDP008
model.load_state_dict(state)
if dist.get_rank() == 0:
    torch.save(model.state_dict(), "checkpoint.pt.tmp")
    os.replace("checkpoint.pt.tmp", "checkpoint.pt")
