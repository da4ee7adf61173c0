# ruff: noqa
# The same Trainer, built with a device number that is 0 in every process: `if self.device_id == 0:` holds
# on every rank, which all write one file.
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, device_id):
        self.model = DDP(model)
        self.device_id = device_id

    def fit(self, epochs):
        for epoch in range(epochs):
            if self.device_id == 0:
                torch.save(self.model.module.state_dict(), "model.tmp")  # expect: DDP005
                os.replace("model.tmp", "model.pt")


def worker(index, world_size):
    dist.init_process_group("gloo", rank=index, world_size=world_size)
    device_id = 0
    trainer = Trainer(torch.nn.Linear(4, 2), device_id)
    trainer.fit(3)


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
