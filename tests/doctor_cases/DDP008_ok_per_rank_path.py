# ruff: noqa
# Near miss: each rank reads back the file it wrote itself (its name holds the rank): its own device.
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
queue_path = os.path.join("runs", f"queue{dist.get_rank()}.pth")
if os.path.isfile(queue_path):
    queue = torch.load(queue_path, weights_only=True)["queue"]
