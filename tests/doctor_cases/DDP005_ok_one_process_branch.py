# ruff: noqa
# Near misses: the side of a "distributed or not" test that the run takes when it is not distributed is one
# process, whose save is the only one: the `else` of `if ddp:` (ddp from RANK), of `if args.distributed:`,
# `if world_size > 1:`, `if dist.is_initialized():`, `if dist.is_available() and dist.is_initialized():`, and
# the body of `if not ddp:`; a helper called only there.
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

ddp = int(os.environ.get("RANK", -1)) != -1


def save_single(stats):
    torch.save(stats, "single.pt")


def train_epoch(stats, epoch):
    if ddp:
        if dist.get_rank() == 0:
            torch.save(stats, f"epoch_{epoch}.pt")
    else:
        torch.save(stats, f"epoch_{epoch}.pt")


def main(args, world_size):
    if ddp:
        dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    stats = torch.zeros(3)
    if ddp:
        model = DDP(model)
    train_epoch(stats, 0)
    if args.distributed:
        dist.barrier()
    else:
        torch.save(stats, "a.pt")
    if world_size > 1:
        dist.barrier()
    else:
        torch.save(stats, "b.pt")
    if dist.is_initialized():
        dist.barrier()
    else:
        torch.save(stats, "c.pt")
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
    else:
        torch.save(stats, "d.pt")
    if not ddp:
        torch.save(stats, "e.pt")
        save_single(stats)


if __name__ == "__main__":
    main(None, 1)
