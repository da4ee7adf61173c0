# ruff: noqa
# The same scheduler's load, from a file that also holds the optimizer's state (tensors on GPU 0) and restores it
# too, or from a file whose dict also stores a model's state_dict: every rank's copy lands on GPU 0.
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
        if resume:
            data = torch.load(os.path.join(folder, "scheduler", "latest.pth"), weights_only=True)  # expect: DDP008
            self.scheduler.load_state_dict(data["scheduler_state_dict"])
            self.optimizer.load_state_dict(data["optimizer_state_dict"])
            both = torch.load(os.path.join(folder, "both.pth"), weights_only=True)  # expect: DDP008
            self.scheduler.load_state_dict(both["sched"])

    def save(self, epoch):
        path = os.path.join(self.folder, "scheduler", "latest.pth")
        torch.save({"epoch": epoch, "scheduler_state_dict": self.scheduler.state_dict(),
                    "optimizer_state_dict": self.optimizer.state_dict()}, path + ".tmp")
        os.replace(path + ".tmp", path)
        both = os.path.join(self.folder, "both.pth")
        torch.save({"sched": self.scheduler.state_dict(), "model": self.model.state_dict()}, both + ".tmp")
        os.replace(both + ".tmp", both)
