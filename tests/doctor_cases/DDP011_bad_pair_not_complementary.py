# ruff: noqa
# A collective under a rank test, with the `and` of a job-wide test: alone, or beside a test that is not its
# complement (an epoch's parity is the same on every rank, but decides whether the main process comes at all).
# And a collective on the ranks that received a value that only the main process receives.
import torch
import torch.distributed as dist


def is_main():
    return dist.get_rank() == 0


def sync():
    if dist.is_initialized():
        dist.barrier()


def finish():
    if dist.is_initialized() and is_main():
        sync()  # expect: DDP011


def step(epoch):
    if not is_main():
        sync()  # expect: DDP011
    if epoch % 2 == 0 and is_main():
        sync()  # expect: DDP011


def score(model, x):
    if is_main():
        return model(x).mean()
    return None


def report(model, x):
    value = score(model, x)
    if value is not None:
        dist.all_reduce(value)  # expect: DDP011
