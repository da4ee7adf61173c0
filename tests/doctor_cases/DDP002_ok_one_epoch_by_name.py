# ruff: noqa
# Near miss: one epoch, written as a name the file binds once, to 1: set_epoch would change nothing.
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

max_epoch = 1


def main(train_set):
    dist.init_process_group("gloo")
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=32, sampler=sampler)
    for epoch in range(max_epoch):
        for x, y in loader:
            pass
