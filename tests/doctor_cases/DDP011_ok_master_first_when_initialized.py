# ruff: noqa
# Near miss: a context manager lets the main process go first. The others wait before the body, the main
# process after it; `dist.is_initialized()` holds on every rank of the job, so the second test picks the same
# ranks as `is_main()`: each rank calls sync() once, in one of two complementary `if`s.
from contextlib import contextmanager

import torch.distributed as dist


def is_main():
    return dist.get_rank() == 0


def sync():
    if dist.is_initialized():
        dist.barrier()


@contextmanager
def main_first():
    if not is_main():
        sync()
    yield
    if dist.is_initialized() and is_main():
        sync()


@contextmanager
def main_first_by_rank(rank):
    if rank != 0 and dist.is_initialized():
        dist.barrier()
    yield
    if rank == 0:
        dist.barrier()


def prepare(rank):
    with main_first_by_rank(rank):
        pass
