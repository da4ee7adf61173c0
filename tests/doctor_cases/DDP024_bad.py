# ruff: noqa
# A snapshot trainer for several nodes: global rank 0 writes the snapshot, and every rank resumes if it finds the
# file where it runs. On nodes that do not share the folder, node 0 resumes and the others start over.
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, snapshot_path):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.model = model
        self.epochs_run = 0
        self.snapshot_path = snapshot_path
        if os.path.exists(snapshot_path):  # expect: DDP024
            self._load_snapshot(snapshot_path)
        self.model = DDP(self.model)

    def _load_snapshot(self, path):
        snapshot = torch.load(path, map_location="cpu", weights_only=True)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]

    def _save_snapshot(self, epoch):
        torch.save({"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch + 1}, "snapshot.tmp")
        os.replace("snapshot.tmp", self.snapshot_path)

    def train(self, max_epochs):
        for epoch in range(self.epochs_run, max_epochs):
            if self.global_rank == 0 and epoch % 5 == 0:
                self._save_snapshot(epoch)


def main():
    dist.init_process_group("gloo")
    Trainer(torch.nn.Linear(4, 4), "snapshot.pt").train(10)
