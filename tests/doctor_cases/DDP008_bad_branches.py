# ruff: noqa
# Every rank loads after joining the group: in a function, in a branch without a map_location twin, in a loop.
import torch
import torch.distributed as dist


def main(args):
    dist.init_process_group("gloo")
    if args.resume:
        state = torch.load(args.resume, weights_only=True)  # expect: DDP008
    for path in args.extra:
        torch.load(path, weights_only=True)  # expect: DDP008
    return state
