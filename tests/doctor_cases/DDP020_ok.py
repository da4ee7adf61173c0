# ruff: noqa
# Near misses: resume at epoch + 1; store epoch + 1 as the next epoch.
import os

import torch
import torch.distributed as dist


def train(model, epochs, path):
    start_epoch = 0
    if os.path.exists(path):
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        start_epoch = checkpoint["epoch"] + 1
    for epoch in range(start_epoch, epochs):
        if dist.get_rank() == 0:
            torch.save({"model": model.state_dict(), "epoch": epoch}, path + ".tmp")
            os.replace(path + ".tmp", path)


def train_next(model, epochs, path):
    state = torch.load(path, map_location="cpu", weights_only=True) if os.path.exists(path) else {"next_epoch": 0}
    for epoch in range(state["next_epoch"], epochs):
        if dist.get_rank() == 0:
            torch.save({"model": model.state_dict(), "next_epoch": epoch + 1}, path + ".tmp")
            os.replace(path + ".tmp", path)
