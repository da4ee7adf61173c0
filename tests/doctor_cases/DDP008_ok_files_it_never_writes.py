# ruff: noqa
# Near miss: every rank loads without map_location, but no load reads a file this script writes with GPU
# tensors: pretrained weights from elsewhere, an embedding table, a scheduler's state (numbers), cached
# Python objects; the only tensor file it writes is its own checkpoint, loaded with map_location.
import os

import torch
import torch.distributed as dist


def run(args, net, sched):
    dist.init_process_group("gloo")
    net.backbone.load_state_dict(torch.load(args.pretrained_backbone))
    table = torch.load(args.label_vectors)
    sched.load_state_dict(torch.load(args.sched_file))
    if args.cache_file:
        samples = torch.load(args.cache_file)
    else:
        samples = [(i, str(i)) for i in range(10)]
        torch.save(samples, args.cache_file)
    if dist.get_rank() == 0:
        torch.save(sched.state_dict(), args.sched_file)
    if args.resume:
        net.load_state_dict(torch.load(args.resume, map_location="cpu")["net"])
    if dist.get_rank() == 0:
        torch.save({"net": net.state_dict()}, "part")
        os.replace("part", args.resume)
    return table, samples
