# ruff: noqa
# Near miss: the all-reduce switched off by hand for the micro-steps before the last (nanoGPT's way).
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(16):
    model.require_backward_grad_sync = (step + 1) % 4 == 0
    torch.nn.functional.cross_entropy(model(torch.randn(8, 4)), torch.randint(2, (8,))).backward()
    if (step + 1) % 4 == 0:
        optimizer.step()
        optimizer.zero_grad()
