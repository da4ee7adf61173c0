# ruff: noqa
# Near miss: the single-process path of a script saves before the function forms the group (loop included).
import torch
import torch.distributed as dist


def main(args, model):
    if not args.distributed:
        for epoch in range(args.epochs):
            torch.save(model.state_dict(), "single.tmp")
        return
    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), "ddp.tmp")


main(ARGS, MODEL)
