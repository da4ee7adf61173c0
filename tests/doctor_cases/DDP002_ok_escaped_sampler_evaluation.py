# ruff: noqa
# Near misses: samplers that leave their helper, with no set_epoch anywhere, but for evaluation (the helper's
# name says so, or the dataset's), or without shuffling: their order does not matter.
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler


def build_eval_dataloader(dataset):
    return DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset))


def loaders(train_set, val_set):
    val_sampler = DistributedSampler(val_set)
    ordered = DistributedSampler(train_set, shuffle=False)
    return DataLoader(val_set, sampler=val_sampler), DataLoader(train_set, sampler=ordered)


def train(dataset, epochs):
    for epoch in range(epochs):
        for batch in build_eval_dataloader(dataset):
            pass
