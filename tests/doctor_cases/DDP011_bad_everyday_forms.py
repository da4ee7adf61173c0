# ruff: noqa
# The everyday forms: a rank test joined to another condition, an early return, `if not rank:`, and a name
# that holds a rank test.
import torch
import torch.distributed as dist


def evaluate(x):
    if dist.get_rank() != 0:
        return
    dist.all_reduce(x)  # expect: DDP011


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for epoch in range(10):
        if rank == 0 and epoch % 10 == 0:
            dist.barrier()  # expect: DDP011
    if not rank:
        dist.barrier()  # expect: DDP011
    is_main = rank == 0
    if is_main:
        dist.all_reduce(torch.ones(1))  # expect: DDP011
    evaluate(torch.ones(1))


main()
