# ruff: noqa
# Near misses: a guard at the call, a guard in the function, an early return, a helper never called here.
import os

import torch
import torch.distributed as dist


def save(model, path):
    tmp = path + ".tmp"
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)


def save_if_main(model, path):
    if dist.get_rank() != 0:
        return
    torch.save(model.state_dict(), path + ".tmp")
    os.replace(path + ".tmp", path)


def export(model, path):  # called from another file, perhaps under a guard: nothing to say
    torch.save(model.state_dict(), path + ".tmp")
    os.replace(path + ".tmp", path)


def main():
    dist.init_process_group("gloo")
    is_main = dist.get_rank() == 0
    model = torch.nn.Linear(4, 2)
    for epoch in range(2):
        if dist.get_rank() == 0:
            save(model, "model.pt")
        save_if_main(model, "other.pt")
        dist.barrier()
    if is_main:
        torch.save({"weights": model.state_dict()}, "final.tmp")
        os.replace("final.tmp", "final.pt")


if __name__ == "__main__":
    main()
