# ruff: noqa
import os

import torch
import torch.distributed as dist


def train(model, optimizer, epochs, path):
    start_epoch = 0
    if os.path.exists(path):
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(checkpoint["model"])
        start_epoch = checkpoint["epoch"]
    for epoch in range(start_epoch, epochs):  # expect: DDP020
        ...  # train one epoch
        if dist.get_rank() == 0:
            torch.save({"model": model.state_dict(), "epoch": epoch}, path + ".tmp")
            os.replace(path + ".tmp", path)


class Trainer:
    def load(self, path):
        snapshot = torch.load(path, map_location="cpu", weights_only=True)
        self.epochs_run = snapshot["EPOCHS_RUN"]

    def save(self, epoch, path):
        snapshot = {"MODEL_STATE": self.model.module.state_dict()}
        snapshot["EPOCHS_RUN"] = epoch
        torch.save(snapshot, path + ".tmp")
        os.replace(path + ".tmp", path)

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):  # expect: DDP020
            if dist.get_rank() == 0:
                self.save(epoch, "snapshot.pt")
