# ruff: noqa
# The method that saves is called under `if rank == 0:` once, but also on the distributed side of
# `if parallel == True:` with no rank test: every rank writes the file.
import os

import torch
import torch.distributed as dist


class Trainer:
    def __init__(self, model):
        self.model = model

    def checkpoint(self):
        torch.save(self.model.state_dict(), "model.pt.tmp")  # expect: DDP005
        os.replace("model.pt.tmp", "model.pt")


def main(parallel):
    if parallel == True:
        dist.init_process_group("gloo")
        rank = dist.get_rank()
    else:
        rank = 0
    trainer = Trainer(torch.nn.Linear(4, 2))
    for epoch in range(3):
        if parallel == True:
            if rank == 0:
                trainer.checkpoint()
            trainer.checkpoint()
        else:
            trainer.checkpoint()


if __name__ == "__main__":
    main(bool(int(os.environ.get("PARALLEL", "0"))))
