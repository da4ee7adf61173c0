# ruff: noqa
# Near misses: rank 0 prints; a line that names its rank; errors to stderr; prints outside loops.
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
print("starting")  # once per process, before the work: not the flood this rule is about
for epoch in range(3):
    loss = torch.tensor(1.0)
    dist.all_reduce(loss)
    if rank == 0:
        print(f"epoch {epoch} loss {loss.item():.3f}")
    print(f"[rank {rank}] epoch {epoch} done")
    if not torch.isfinite(loss):
        print("non-finite loss", file=sys.stderr)
