# ruff: noqa
# Near miss: mp.spawn's index goes into a Trainer, whose __init__ keeps it as self.device_id; the save is
# guarded by `if self.device_id == 0:`, one process.
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
                torch.save(self.model.module.state_dict(), "model.tmp")
                os.replace("model.tmp", "model.pt")


def worker(index, world_size):
    dist.init_process_group("gloo", rank=index, world_size=world_size)
    trainer = Trainer(torch.nn.Linear(4, 2), device_id=index)
    trainer.fit(3)


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
