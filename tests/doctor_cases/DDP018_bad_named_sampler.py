# ruff: noqa
# The validation sampler is bound to a name and given to a loader that a nested function iterates; the sums are
# all-reduced, so the padded duplicates count. (An unused holdout loader beside it stays silent.)
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def fit(net, train_set, valid_set, holdout_set):
    dist.init_process_group("gloo")
    valid_sampler = DistributedSampler(valid_set, shuffle=False)  # expect: DDP018
    holdout_sampler = DistributedSampler(holdout_set, shuffle=False)
    valid_loader = DataLoader(valid_set, batch_size=8, sampler=valid_sampler)
    unused_holdout = DataLoader(holdout_set, batch_size=8, sampler=holdout_sampler)

    def score():  # reads the loader of the enclosing function
        hits = torch.zeros(2)
        for x, y in valid_loader:
            hits += torch.tensor([float((net(x).argmax(1) == y).sum()), float(len(y))])
        dist.all_reduce(hits)
        return hits

    return score()
