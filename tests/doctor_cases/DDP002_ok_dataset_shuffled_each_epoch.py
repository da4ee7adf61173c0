# ruff: noqa
# Near miss: each epoch builds a new DistributedSampler, without set_epoch, over a dataset that the same pass of the
# epoch loop shuffles: rebuilt by a call passed shuffle=True (rank 0 shuffles and broadcasts it), made from a list
# shuffled in place, or shuffled with a seed drawn from the epoch. The sampler's permutation repeats, but the data
# under it is in a new order each epoch, alike on every rank; set_epoch would change nothing that matters.
import random

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def build_dataset(items, shuffle=False):
    if dist.get_rank() == 0:
        items = list(items)
        if shuffle:
            random.shuffle(items)
        box = [items]
    else:
        box = [None]
    dist.broadcast_object_list(box, src=0)
    return TensorDataset(torch.stack(box[0]))


def main():
    dist.init_process_group("gloo")
    items = list(torch.randn(64, 4))
    for epoch in range(10):
        dataset_train = build_dataset(items, shuffle=True)
        loader = DataLoader(dataset_train, batch_size=8, sampler=DistributedSampler(dataset_train, shuffle=True))
        for (x,) in loader:
            pass
    rows = list(range(64))
    for epoch in range(10):
        random.Random(epoch).shuffle(rows)
        data = TensorDataset(torch.stack([items[i] for i in rows]))
        for (x,) in DataLoader(data, batch_size=8, sampler=DistributedSampler(data)):
            pass
    for epoch in range(10):
        order = np.arange(64)
        np.random.shuffle(order)
        part = TensorDataset(torch.stack([items[i] for i in order]))
        sampler = DistributedSampler(part)
        for (x,) in DataLoader(part, batch_size=8, sampler=sampler):
            pass


def train_hf(hf_dataset, epochs):
    for epoch in range(epochs):
        epoch_set = hf_dataset.shuffle(seed=1000 + epoch)
        for batch in DataLoader(epoch_set, batch_size=8, sampler=DistributedSampler(epoch_set)):
            pass


if __name__ == "__main__":
    main()
    train_hf(None, 10)
