# ruff: noqa
import os

import torch.distributed as dist


def main(args):
    dist.init_process_group("gloo")
    args.local_rank = int(os.environ["LOCAL_RANK"])
    if args.local_rank in [-1, 0]:
        dist.barrier()  # expect: DDP011
