# ruff: noqa
# The same method, called after the epoch's batch loop: the file stores the finished epoch as it is, and the
# resume trains that epoch again. A save that a batch loop precedes in the loop fires too.
import os

import torch
import torch.distributed as dist


class Trainer:
    def __init__(self, model, optimizer, loader, epochs, path):
        self.model, self.optimizer, self.loader, self.epochs, self.path = model, optimizer, loader, epochs, path
        self.start_epoch = 0
        if os.path.exists(path):
            saved = torch.load(path, map_location="cpu", weights_only=True)
            self.model.load_state_dict(saved["model_state_dict"])
            self.start_epoch = saved["epoch"]

    def save_checkpoints(self, epoch):
        torch.save({"epoch": epoch, "model_state_dict": self.model.state_dict()}, self.path)

    def run(self):
        for epoch in range(self.start_epoch, self.epochs + 1):  # expect: DDP020
            self.model.train()
            for batch in self.loader:
                self.optimizer.zero_grad()
                self.model(batch).sum().backward()
                self.optimizer.step()
            if dist.get_rank() == 0 and epoch % 10 == 0:
                self.save_checkpoints(epoch)


def fit(model, optimizer, loader, epochs, path):
    first = 0
    if os.path.exists(path):
        first = torch.load(path, map_location="cpu", weights_only=True)["epoch"]
    for epoch in range(first, epochs):  # expect: DDP020
        for batch in loader:
            optimizer.step()
        if dist.get_rank() == 0:
            torch.save({"model": model.state_dict(), "epoch": epoch}, path)
        for batch in loader:
            optimizer.step()
