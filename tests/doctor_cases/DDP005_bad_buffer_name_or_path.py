# ruff: noqa
# Near misses of a save into memory: a path, a name that is a buffer on one branch and a file path on
# another, a file opened for writing: each writes a file on every rank.
import io

import torch
import torch.distributed as dist


def write(model, to_disk):
    torch.save(model.weight, "weights.pt")  # expect: DDP005
    f = io.BytesIO()
    if to_disk:
        f = "weights_copy.pt"
    torch.save(model.weight, f)  # expect: DDP005
    with open("weights_open.pt", "wb") as g:
        torch.save(model.weight, g)  # expect: DDP005


def main():
    dist.init_process_group("gloo")
    write(torch.nn.Linear(4, 2), True)


if __name__ == "__main__":
    main()
