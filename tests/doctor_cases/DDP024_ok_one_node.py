# ruff: noqa
# Near miss: a script that knows no local rank, only the rank (one machine): every rank sees the same folder.
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.Linear(4, 4)
if os.path.exists("ckpt.pt"):
    model.load_state_dict(torch.load("ckpt.pt", map_location="cpu", weights_only=True))
if rank == 0:
    torch.save(model.state_dict(), "ckpt.pt" + ".tmp")
    os.replace("ckpt.pt" + ".tmp", "ckpt.pt")
