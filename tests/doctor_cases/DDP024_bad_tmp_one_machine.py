# ruff: noqa
# /tmp, written by global rank 0 alone, in a script that never names nodes: on one machine every rank sees the
# same /tmp, so this is DDP024's advice (a risk on several nodes), not DDP025's warning.
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
local_rank = int(os.environ["LOCAL_RANK"])
rank = dist.get_rank()
model = torch.nn.Linear(4, 4)
path = "/tmp/snapshot.pt"
if os.path.exists(path):  # expect: DDP024
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
if rank == 0:
    torch.save(model.state_dict(), path + ".tmp")
    os.replace(path + ".tmp", path)
