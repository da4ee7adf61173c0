# ruff: noqa
# A job for several nodes keeps its snapshot in /tmp, written by global rank 0 alone: after a restart only node 0
# finds it.
import argparse
import os
from pathlib import Path

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--snapshot", default="/tmp/run/snapshot.pt")
parser.add_argument("--nnodes", type=int, default=2)
args = parser.parse_args()

dist.init_process_group("gloo")
local_rank = int(os.environ["LOCAL_RANK"])
rank = dist.get_rank()
model = torch.nn.Linear(4, 4)
if Path(args.snapshot).exists():  # expect: DDP025
    model.load_state_dict(torch.load(args.snapshot, map_location="cpu", weights_only=True))
if rank == 0:
    torch.save(model.state_dict(), args.snapshot + ".tmp")
    os.replace(args.snapshot + ".tmp", args.snapshot)
