# ruff: noqa
# Near miss: rank 0 evaluates through helpers, but one is given the model without DDP (model.module), one
# the DDP model of a module without buffers (Linear only: its forward runs no collective), one a DDP model
# whose buffers the doctor cannot see (a factory's model: precision first).
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def validate(model, data):
    with torch.no_grad():
        return model(data)


def main():
    dist.init_process_group("gloo")
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 1)))
    plain = DDP(nn.Linear(8, 1))
    for epoch in range(3):
        model(torch.randn(4, 8)).sum().backward()
        plain(torch.randn(4, 8)).sum().backward()
        if dist.get_rank() == 0:
            validate(model.module, torch.randn(4, 8))
            validate(plain, torch.randn(4, 8))


def run(make_model):
    # a model from a factory: convert_sync_batchnorm swaps the BatchNorm layers it may not have
    dist.init_process_group("gloo")
    net = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(make_model()))
    if dist.get_rank() == 0:
        validate(net, torch.randn(4, 8))
