# ruff: noqa
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
state = torch.load("checkpoint.pt", weights_only=True)  # expect: DDP008
