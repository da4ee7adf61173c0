# ruff: noqa
# Near miss, the common correct idiom: one rank decides whether to resume, and broadcasts its answer; every rank
# then reads the (shared) file or none does.
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
local_rank = int(os.environ["LOCAL_RANK"])
rank = dist.get_rank()
model = torch.nn.Linear(4, 4)
path = "checkpoints/last.pt"
found = [os.path.exists(path) if rank == 0 else None]
dist.broadcast_object_list(found, src=0)
if found[0]:
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
if rank == 0:
    torch.save(model.state_dict(), path + ".tmp")
    os.replace(path + ".tmp", path)
