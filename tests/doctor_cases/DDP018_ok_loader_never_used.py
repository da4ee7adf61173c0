# ruff: noqa
# Near miss: the holdout set gets a padded sampler and a loader, but nothing ever reads that loader (kept for
# later): no metric over it, nothing counted twice. The scores loader is used, but only in a comparison.
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def setup(train_set, holdout_set, test_set):
    dist.init_process_group("gloo")
    train_loader = DataLoader(train_set, batch_size=8, sampler=DistributedSampler(train_set))
    holdout_sampler = DistributedSampler(holdout_set, shuffle=False)
    _holdout_loader = DataLoader(holdout_set, batch_size=8, sampler=holdout_sampler)
    test_loader = DataLoader(test_set, batch_size=8, sampler=DistributedSampler(test_set, shuffle=False))
    if test_loader is None:
        pass
    total = torch.zeros(1)
    for x in train_loader:
        total += x.sum()
    dist.all_reduce(total)
    return total
