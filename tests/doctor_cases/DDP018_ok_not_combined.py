# ruff: noqa
# Near miss: nothing is combined over the ranks: rank 0 prints its own shard's validation loss (one shard's
# figure, which padding does not make a sum of duplicates).
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def validate(model, val_set, loss_fn):
    loader = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False))
    total = 0.0
    for x, y in loader:
        total += loss_fn(model(x), y).item()
    if dist.get_rank() == 0:
        print(f"rank 0's validation loss {total / len(loader):.3f}")
