# ruff: noqa
# The training sampler feeds an epoch loop without set_epoch; and a loader that a loop of its function
# reads again (`for step in range(rounds):`) is not read in one pass.
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def fit(model, data, epochs):
    sampler = DistributedSampler(data)  # expect: DDP002
    loader = DataLoader(data, sampler=sampler, batch_size=8)
    for epoch in range(epochs):
        for x, in loader:
            model(x).sum().backward()


def refine(model, data, rounds):
    sampler = DistributedSampler(data)  # expect: DDP002
    loader = DataLoader(data, sampler=sampler, batch_size=8)
    for step in range(rounds):
        for x, in loader:
            model(x).sum().backward()


def main():
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    data = TensorDataset(torch.randn(32, 4))
    fit(model, data, 3)
    refine(model, data, 2)
