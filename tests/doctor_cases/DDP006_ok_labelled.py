# ruff: noqa
# Near miss: per-process lines that say which process they come from (device, GPU, host).
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
device = torch.device("cpu")
for epoch in range(2):
    print(f"{device}: epoch {epoch} done")
    print(f"[GPU{torch.cuda.current_device() if torch.cuda.is_available() else -1}] epoch {epoch}")
    print(f"{socket.gethostname()} epoch {epoch}")
