# ruff: noqa
# Near miss: the file holds an LR scheduler's state_dict and the epoch, numbers with no tensor, and the load only
# restores that scheduler (under a key of a dict of plain numbers, or the whole file): map_location has nothing
# to map.
import os

import torch
import torch.distributed as dist


class Trainer:
    def __init__(self, model, optimizer, epochs, folder, resume):
        dist.init_process_group("gloo")
        self.folder = folder
        self.model = torch.nn.parallel.DistributedDataParallel(model.cuda())
        self.optimizer = optimizer
        self.scheduler = torch.optim.lr_scheduler.ExponentialLR(self.optimizer, 0.99)
        self.decay = torch.optim.lr_scheduler.StepLR(self.optimizer, 10)
        if resume:
            data = torch.load(os.path.join(folder, "scheduler", "latest.pth"), weights_only=True)
            self.scheduler.load_state_dict(data["scheduler_state_dict"])
            self.decay.load_state_dict(torch.load(os.path.join(folder, "decay.pth"), weights_only=True))

    def save(self, epoch):
        path = os.path.join(self.folder, "model", "latest.pth")
        torch.save({"epoch": epoch, "model_state_dict": self.model.state_dict()}, path + ".tmp")
        os.replace(path + ".tmp", path)
        path = os.path.join(self.folder, "scheduler", "latest.pth")
        torch.save({"epoch": epoch, "scheduler_state_dict": self.scheduler.state_dict()}, path + ".tmp")
        os.replace(path + ".tmp", path)
        decay = os.path.join(self.folder, "decay.pth")
        torch.save(self.decay.state_dict(), decay + ".tmp")
        os.replace(decay + ".tmp", decay)
