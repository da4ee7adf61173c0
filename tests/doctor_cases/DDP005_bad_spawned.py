# ruff: noqa
# mp.spawn runs train() in every process: its save runs on every rank.
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def train(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = torch.nn.Linear(4, 2)
    torch.save(model.state_dict(), "model.tmp")  # expect: DDP005
    os.replace("model.tmp", "model.pt")


if __name__ == "__main__":
    mp.spawn(train, args=(2,), nprocs=2)
