# ruff: noqa
# Near miss: NCCL in a function the file calls only where CUDA is available; gloo otherwise.
import torch
import torch.distributed as dist


def setup_gpu():
    dist.init_process_group("nccl")


if torch.cuda.is_available():
    setup_gpu()
else:
    dist.init_process_group("gloo")
