# ruff: noqa
# Near miss: the first rank of each node writes the checkpoint (rank % gpus_per_node == 0), so every node holds a
# copy and every rank that looks for it finds it.
import os

import torch
import torch.distributed as dist


def main_worker(gpu, ngpus_per_node, args):
    args.rank = args.node_rank * ngpus_per_node + gpu
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size)
    model = torch.nn.Linear(4, 4)
    if os.path.isfile(args.resume):
        model.load_state_dict(torch.load(args.resume, map_location="cpu", weights_only=True))
    if args.rank % ngpus_per_node == 0:
        torch.save(model.state_dict(), args.resume + ".tmp")
        os.replace(args.resume + ".tmp", args.resume)
