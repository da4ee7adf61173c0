# ruff: noqa
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(16):
    x, y = torch.randn(8, 4), torch.randint(2, (8,))
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    if step % 4 == 0 and dist.get_rank() == 0:
        print(f"step {step}")
