# ruff: noqa
# Twin `if`s that call different collectives, or the same test twice: the hang stays.
import torch
import torch.distributed as dist


def load(path, download):
    if dist.get_rank() != 0:
        dist.barrier()  # expect: DDP011
    data = download(path)
    if dist.get_rank() == 0:
        dist.all_reduce(torch.ones(1))  # expect: DDP011
    if dist.get_rank() == 0:
        dist.all_reduce(torch.ones(1))  # expect: DDP011
    return data
