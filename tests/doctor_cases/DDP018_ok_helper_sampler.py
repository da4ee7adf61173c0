# ruff: noqa
# Near misses: a helper that builds a DistributedSampler, called with the training set only; another called
# for the test set with drop_last=True (no padding); a helper that binds its parameter to something else.
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def get_sampler(dataset):
    return DistributedSampler(dataset)


def get_exact_sampler(dataset):
    return DistributedSampler(dataset, drop_last=True)


def get_shuffled(dataset, other):
    dataset = other
    return DistributedSampler(dataset)


def main(train_dataset, test_dataset, model):
    dist.init_process_group("gloo")
    train_sampler = get_sampler(train_dataset)
    test_sampler = get_exact_sampler(test_dataset)
    extra = get_shuffled(test_dataset, train_dataset)
    test_loader = DataLoader(test_dataset, batch_size=8, sampler=test_sampler)
    total = torch.zeros(1)
    for x, y in test_loader:
        total += model(x).sum()
    dist.all_reduce(total)


def fit(dataset, val_dataset, model):
    """A validation loader that is built and never iterated (only tested against None): nothing is evaluated."""
    dist.init_process_group("gloo")
    val_sampler = get_sampler(val_dataset)
    if val_sampler is not None:
        pass
    total = torch.zeros(1)
    dist.all_reduce(total)
