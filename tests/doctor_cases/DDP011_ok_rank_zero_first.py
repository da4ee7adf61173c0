# ruff: noqa
# Near miss: rank 0 goes first (it downloads), the others wait; then rank 0 waits for them. Each rank calls
# barrier() once, in one of two twin `if`s with opposite tests.
import torch.distributed as dist


def load(path, download):
    if dist.get_rank() != 0:
        dist.barrier()
    data = download(path)
    if dist.get_rank() == 0:
        dist.barrier()
    return data
