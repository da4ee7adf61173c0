# ruff: noqa
# Every rank writes the same file.
import os

import torch
import torch.distributed as dist


def save(model, path):
    tmp = path + ".tmp"
    torch.save(model.state_dict(), tmp)  # expect: DDP005
    os.replace(tmp, path)


def main():
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    for epoch in range(2):
        save(model, "model.pt")
    torch.save({"weights": model.state_dict()}, "final.tmp")  # expect: DDP005
    os.replace("final.tmp", "final.pt")


if __name__ == "__main__":
    main()
