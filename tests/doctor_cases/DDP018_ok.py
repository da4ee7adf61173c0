# ruff: noqa
# Near misses: the training set; drop_last=True; counting unique indices gathered from every rank; no sampler.
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Subset
from torch.utils.data.distributed import DistributedSampler


def loaders(train_set, val_set):
    train = DataLoader(train_set, sampler=DistributedSampler(train_set))
    val = DataLoader(val_set, sampler=DistributedSampler(val_set, shuffle=False, drop_last=True))
    return train, val


def exact(model, val_set):
    indices = torch.tensor(list(DistributedSampler(val_set, shuffle=False)))
    everyone = [torch.empty_like(indices) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, indices)
    return len(set(torch.cat(everyone).tolist()))


def unpadded(val_set):
    shard = Subset(val_set, range(dist.get_rank(), len(val_set), dist.get_world_size()))
    return DataLoader(shard, batch_size=64)
