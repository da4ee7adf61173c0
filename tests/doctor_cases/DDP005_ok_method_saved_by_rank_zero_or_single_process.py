# ruff: noqa
# Near miss: the method that saves is called under `if rank == 0:` when the run is distributed, and in the
# `else` of `if parallel == True:` (the flag that forms the group): the single process. One process saves.
import os

import torch
import torch.distributed as dist


class Trainer:
    def __init__(self, model):
        self.model = model

    def checkpoint(self):
        torch.save(self.model.state_dict(), "model.pt.tmp")
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
        else:
            trainer.checkpoint()


if __name__ == "__main__":
    main(bool(int(os.environ.get("PARALLEL", "0"))))
