# ruff: noqa
# An earlier line is not enough: a loop that also forms the group runs the save again after it.
import torch
import torch.distributed as dist


def main(args, model):
    for attempt in range(3):
        torch.save(model.weight, "weight.tmp")  # expect: DDP005
        dist.init_process_group("gloo")


main(ARGS, MODEL)
