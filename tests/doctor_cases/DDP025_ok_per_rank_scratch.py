# ruff: noqa
# Near miss: a scratch file in /tmp whose name holds the rank, written by each rank for itself (a per-rank queue),
# while global rank 0 alone writes the checkpoint, to a shared folder.
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
local_rank = int(os.environ["LOCAL_RANK"])
node_rank = int(os.environ["SLURM_NODEID"])
rank = dist.get_rank()
model = torch.nn.Linear(4, 4)
scratch = f"/tmp/queue_{rank}.pt"
if os.path.exists(scratch):
    queue = torch.load(scratch, map_location="cpu", weights_only=True)
if rank == 0:
    torch.save(model.state_dict(), "checkpoints/model.tmp")
    os.replace("checkpoints/model.tmp", "checkpoints/model.pt")
