# ruff: noqa
import torch
import torch.distributed as dist

backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend)
if torch.cuda.is_available():
    dist.init_process_group("nccl")
else:
    dist.init_process_group("gloo")
