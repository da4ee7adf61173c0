# ruff: noqa
# Rank 0 alone evaluates through the DDP model passed to a helper: the model has BatchNorm buffers, so its
# forward broadcasts them from rank 0, and the other ranks never join: rank 0 waits until the timeout.
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 1))

    def forward(self, x):
        return self.body(x)


def evaluate(model, data):
    if dist.get_rank() != 0:
        return None
    model.eval()
    with torch.no_grad():
        return model(data)  # expect: DDP011


def validate(model, data):
    with torch.no_grad():
        return model(data)


def main():
    dist.init_process_group("gloo")
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        loss = model(torch.randn(4, 8)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        evaluate(model, torch.randn(4, 8))
        if dist.get_rank() == 0:
            validate(model, torch.randn(4, 8))  # expect: DDP011
