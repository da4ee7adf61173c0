# ruff: noqa
# Near misses: both samplers told by name; a set_epoch through the loader that the doctor does not follow.
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

dist.init_process_group("gloo")
train_sampler = DistributedSampler(train_set)
val_sampler = DistributedSampler(val_set, shuffle=False)
for epoch in range(5):
    train_sampler.set_epoch(epoch)
    val_sampler.set_epoch(epoch)


def other(train_set):
    loader = DataLoader(train_set, sampler=DistributedSampler(train_set))
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
