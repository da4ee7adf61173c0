# ruff: noqa
# Every rank loads after joining the group, in a branch without a map_location twin, in a loop: files that
# the script itself writes from its GPU model.
import os

import torch
import torch.distributed as dist


def main(args, model):
    dist.init_process_group("gloo")
    if args.resume:
        state = torch.load(args.resume, weights_only=True)  # expect: DDP008
        model.load_state_dict(state["weights"])
    for path in args.snapshots:
        model.load_state_dict(torch.load(path, weights_only=True))  # expect: DDP008
    if dist.get_rank() == 0:
        torch.save({"weights": model.state_dict(), "epoch": 3}, args.out + ".tmp")
        os.replace(args.out + ".tmp", args.out)
