# ruff: noqa
# Near misses: `rank != -1` and `local_rank is None` ask whether the run is distributed; every rank answers
# alike. yolov5's "local rank 0 first": two `if`s on the same rank that call barrier() pair up.
from contextlib import contextmanager

import torch
import torch.distributed as dist


def early_stop(stop, rank):
    if rank != -1:
        flags = [stop if rank == 0 else None]
        dist.broadcast_object_list(flags, 0)
        stop = flags[0]
    return stop


def sync(args):
    if args.local_rank is not None:
        dist.barrier()


@contextmanager
def zero_first(local_rank):
    if local_rank not in [-1, 0]:
        dist.barrier()
    yield
    if local_rank == 0:
        dist.barrier()
