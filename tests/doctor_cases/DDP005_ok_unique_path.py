# ruff: noqa
# Near misses: a file whose name is new in every process (uuid4, uuid1, the process id, tempfile): each rank
# writes its own file, on purpose (a debugging dump of the batch that failed on this rank).
import os
import tempfile
import uuid

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def dump_batch(batch, folder):
    filename = f"{folder}/batch-{uuid.uuid4()}.pt"
    torch.save(batch, filename)


def main(batch):
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(4, 2))
    try:
        model(batch)
    except RuntimeError:
        dump_batch(batch, "dumps")
    torch.save(batch, f"batch-{uuid.uuid1().hex}.pt")
    torch.save(batch, os.path.join("dumps", f"{os.getpid()}.pt"))
    fd, path = tempfile.mkstemp(suffix=".pt")
    torch.save(batch, path)
    with tempfile.NamedTemporaryFile(suffix=".pt") as f:
        torch.save(batch, f)


if __name__ == "__main__":
    main(torch.ones(2, 4))
