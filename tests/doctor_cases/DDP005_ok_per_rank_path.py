# ruff: noqa
# Near miss: each rank saves its own state to a file whose name holds the rank (through a variable).
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
queue_path = os.path.join("runs", "queue" + str(dist.get_rank()) + ".tmp")
torch.save({"queue": torch.zeros(4)}, queue_path)
