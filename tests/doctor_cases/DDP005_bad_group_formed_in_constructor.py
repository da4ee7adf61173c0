# ruff: noqa
# The group is formed by a constructor (Trainer.__init__): what main() calls after building the Trainer runs on
# every rank, and its save writes one file from all of them.
import os

import torch
import torch.distributed as dist


class Trainer:
    def __init__(self):
        dist.init_process_group("gloo")
        self.model = torch.nn.Linear(2, 2)


def finish(trainer):
    torch.save(trainer.model.state_dict(), "model.tmp")  # expect: DDP005
    os.replace("model.tmp", "model.pt")


def main():
    trainer = Trainer()
    finish(trainer)


if __name__ == "__main__":
    main()
