# ruff: noqa
# Near misses: a rank-0 forward through a DDP model with no buffers (Embedding, LSTM, Linear, LayerNorm) is
# no collective; nor is one with broadcast_buffers=False; a model the doctor cannot see into (a parameter)
# is left alone. `distributed = args.local_rank >= 0` (or `> -1`, `not in (-1,)`) asks whether the run is
# distributed: every rank of a distributed run takes it.
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        self.rnn = nn.LSTM(16, 16)
        self.norm = nn.LayerNorm(16)
        self.out = nn.Linear(16, 2)


def validate(args, loader):
    model = Tagger()
    ddp_model = DDP(model)
    if dist.get_rank() == 0:
        with torch.no_grad():
            for x in loader:
                ddp_model(x)


def validate_bn_without_broadcast(loader):
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    ddp_model = DDP(model, broadcast_buffers=False)
    if dist.get_rank() == 0:
        ddp_model(next(iter(loader)))


def validate_given(model_class, loader):
    ddp_model = DDP(model_class())
    if dist.get_rank() == 0:
        ddp_model(next(iter(loader)))


def resume(args, checkpoint):
    distributed = args.local_rank >= 0
    started = args.local_rank > -1
    launched = args.local_rank not in (-1,)
    if checkpoint:
        if distributed:
            dist.barrier()
        if started:
            dist.barrier()
        if launched:
            dist.barrier()
