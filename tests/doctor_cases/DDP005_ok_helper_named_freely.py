# ruff: noqa
# Near miss: the save sits under a helper whose name says nothing of ranks, but whose return is a rank test
# (true in one process, or on rank 0 of a group): one writer.
import os

import torch
import torch.distributed as dist


def writes_files():
    return not dist.is_available() or not dist.is_initialized() or dist.get_rank() == 0


def main():
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    for step in range(10):
        if writes_files() and step % 5 == 0:
            torch.save(model.weight.detach().cpu(), os.path.join("out", f"weight{step}.pt"))


if __name__ == "__main__":
    main()
