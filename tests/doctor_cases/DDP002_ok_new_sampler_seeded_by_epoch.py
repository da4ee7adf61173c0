# ruff: noqa
# Near miss: each epoch builds a new DistributedSampler whose seed depends on the epoch (directly, or through a
# name set from it): every epoch draws a new order, alike on every rank; set_epoch would change nothing.
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    data = TensorDataset(torch.randn(64, 4))
    for epoch in range(10):
        sampler = DistributedSampler(data, seed=1234 + epoch)
        for (x,) in DataLoader(data, batch_size=8, sampler=sampler):
            pass
    for epoch in range(10):
        epoch_seed = 7 * epoch + 1
        for (x,) in DataLoader(data, batch_size=8, sampler=DistributedSampler(data, seed=epoch_seed)):
            pass


if __name__ == "__main__":
    main()
