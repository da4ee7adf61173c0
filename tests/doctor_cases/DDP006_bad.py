# ruff: noqa
import logging

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
log = logging.getLogger(__name__)
for epoch in range(3):
    loss = torch.tensor(1.0)
    dist.all_reduce(loss)
    print(f"epoch {epoch} loss {loss.item():.3f}")  # expect: DDP006
    logging.info("epoch %d done", epoch)  # expect: DDP006
