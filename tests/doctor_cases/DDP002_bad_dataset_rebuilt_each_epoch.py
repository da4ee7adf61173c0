# ruff: noqa
# A new DistributedSampler each epoch, without set_epoch, over a dataset that the epoch loop rebuilds but does not
# put in a new order: loaded again the same way, rebuilt with shuffle=False, shuffled with a seed that the epoch
# does not change, or shuffled after reseeding (or by a generator seeded) with the same value each epoch. Every
# epoch repeats epoch 0's order.
import random

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def build_dataset(items, shuffle=False, seed=0):
    items = list(items)
    if shuffle:
        random.Random(seed).shuffle(items)
    return TensorDataset(torch.stack(items))


def main(seed=0):
    dist.init_process_group("gloo")
    items = list(torch.randn(64, 4))
    for epoch in range(10):
        for part in range(2):
            epoch_dataset = build_dataset(items[part::2])
            sampler = DistributedSampler(epoch_dataset)  # expect: DDP002
            for (x,) in DataLoader(epoch_dataset, batch_size=8, sampler=sampler):
                pass
    for epoch in range(10):
        dataset_train = build_dataset(items, shuffle=False)
        for (x,) in DataLoader(dataset_train, batch_size=8, sampler=DistributedSampler(dataset_train)):  # expect: DDP002
            pass
    for epoch in range(10):
        same = build_dataset(items, shuffle=True, seed=seed)
        for (x,) in DataLoader(same, batch_size=8, sampler=DistributedSampler(same)):  # expect: DDP002
            pass
    for epoch in range(10):
        random.seed(seed)
        rows = list(range(64))
        random.shuffle(rows)
        data = TensorDataset(torch.stack([items[i] for i in rows]))
        for (x,) in DataLoader(data, batch_size=8, sampler=DistributedSampler(data)):  # expect: DDP002
            pass
    for epoch in range(10):
        rows = list(range(64))
        random.Random(seed).shuffle(rows)
        data = TensorDataset(torch.stack([items[i] for i in rows]))
        for (x,) in DataLoader(data, batch_size=8, sampler=DistributedSampler(data)):  # expect: DDP002
            pass


def train_hf(hf_dataset, epochs, seed):
    for epoch in range(epochs):
        epoch_set = hf_dataset.shuffle(seed=seed)
        for batch in DataLoader(epoch_set, batch_size=8, sampler=DistributedSampler(epoch_set)):  # expect: DDP002
            pass


if __name__ == "__main__":
    main()
    train_hf(None, 10, 0)
