# ruff: noqa
# A count of epochs that is a name bound to 1 and then changed (or bound to more): several epochs, the same order.
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

max_epoch = 1


def main(train_set, args):
    global max_epoch
    dist.init_process_group("gloo")
    max_epoch = args.epochs
    sampler = DistributedSampler(train_set)  # expect: DDP002
    loader = DataLoader(train_set, batch_size=32, sampler=sampler)
    for epoch in range(max_epoch):
        for x, y in loader:
            pass
