# ruff: noqa
# The ranks that leave early call barrier() on their way out, but rank 0 calls another collective (or none, or
# one only under a condition) on the path that falls through: the collectives do not pair up.
import torch
import torch.distributed as dist


def other_collective(t):
    if dist.get_rank() != 0:
        dist.barrier()  # expect: DDP011
        return None
    dist.all_reduce(t)  # expect: DDP011
    return t


def no_collective(t):
    if dist.get_rank() != 0:
        dist.barrier()  # expect: DDP011
        return None
    return t * 2


def conditional_collective(t, check):
    if dist.get_rank() != 0:
        dist.barrier()  # expect: DDP011
        return None
    if check:
        dist.barrier()  # expect: DDP011
    return t


def main():
    dist.init_process_group("gloo")
    t = torch.ones(2)
    other_collective(t)
    no_collective(t)
    conditional_collective(t, True)


if __name__ == "__main__":
    main()
