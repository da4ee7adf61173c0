# ruff: noqa
# A load in a class that nothing uses: the entry point builds DistTrainer, whose own load maps; BaseTrainer
# (a trainer for one process) is named by no call, no base, no import, no string: its methods never run.
import torch
import torch.distributed as dist


class BaseTrainer:
    def __init__(self, model, resume):
        self.model = model
        self._resume_checkpoint(resume)

    def _resume_checkpoint(self, path):
        checkpoint = torch.load(path)
        self.model.load_state_dict(checkpoint["state_dict"])


class DistTrainer:
    def __init__(self, model, resume, rank):
        self.model = model
        self.rank = rank
        self._resume_checkpoint(resume)

    def _save_checkpoint(self, path):
        if self.rank == 0:
            torch.save({"state_dict": self.model.state_dict()}, path)  # ddp-doctor: ignore[DDP007]

    def _resume_checkpoint(self, path):
        checkpoint = torch.load(path, map_location=f"cuda:{self.rank}")
        self.model.load_state_dict(checkpoint["state_dict"])


def main(model, resume, rank):
    dist.init_process_group("gloo")
    DistTrainer(model, resume, rank)


if __name__ == "__main__":
    main(build(), "last.pth", 0)
