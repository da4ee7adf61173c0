# ruff: noqa
import torch.distributed as dist

dist.init_process_group(backend="nccl")  # expect: DDP012
