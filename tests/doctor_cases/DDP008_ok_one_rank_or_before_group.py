# ruff: noqa
# Near misses: one rank loads (DDP broadcasts its weights); a load before this function joins the group
# (one process); a branch that leaves map_location out on purpose while its twin passes it.
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(args, model):
    if args.single:
        model.load_state_dict(torch.load(args.ckpt, weights_only=True))
        return model
    dist.init_process_group("gloo")
    if dist.get_rank() == 0 and args.ckpt:
        model.load_state_dict(torch.load(args.ckpt, weights_only=True))
    if args.gpu is None:
        state = torch.load(args.resume, weights_only=True)
    else:
        state = torch.load(args.resume, map_location=f"cuda:{args.gpu}", weights_only=True)
    return DDP(model), state
