# ruff: noqa
# The evaluation sampler is built by a helper of the file, over the test set that the call passes: padded
# shards, and a loss reduced over the ranks. The finding is at the call that passes the test set.
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def get_sampler(dataset):
    if dist.is_initialized():
        return DistributedSampler(dataset)
    return None


def main(train_dataset, test_dataset, model):
    dist.init_process_group("gloo")
    train_sampler = get_sampler(train_dataset)
    test_sampler = get_sampler(test_dataset)  # expect: DDP018
    test_loader = DataLoader(test_dataset, batch_size=8, sampler=test_sampler)
    total = torch.zeros(1)
    for x, y in test_loader:
        total += model(x).sum()
    dist.all_reduce(total)
