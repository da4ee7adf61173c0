# ruff: noqa
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def global_accuracy(correct, seen):
    totals = torch.tensor([correct, seen], dtype=torch.float64)
    dist.all_reduce(totals)
    return totals[0] / totals[1]


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ddp_model = DDP(torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.BatchNorm1d(2)))  # buffers: running stats
    for epoch in range(2):
        if rank == 0:
            dist.barrier()  # expect: DDP011
            print(global_accuracy(3, 4))  # expect: DDP011
            out = ddp_model(torch.randn(2, 4))  # expect: DDP011
        if dist.get_rank() != 0:
            pass
        else:
            dist.all_reduce(torch.ones(1))  # expect: DDP011
