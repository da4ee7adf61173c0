# ruff: noqa
# A name that is not unique per process: a timestamp (two ranks in the same second write one file), the
# host name (every rank of a node), a fixed name.
import socket
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(batch):
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(4, 2))
    torch.save(batch, f"batch-{time.time():.0f}.pt")  # expect: DDP005
    torch.save(batch, f"batch-{socket.gethostname()}.pt")  # expect: DDP005


if __name__ == "__main__":
    main(torch.ones(2, 4))
