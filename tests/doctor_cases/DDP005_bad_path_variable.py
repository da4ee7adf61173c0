# ruff: noqa
# A path in a variable that does not name the rank: every rank writes the same file.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
queue_path = "runs/queue.tmp"
torch.save({"queue": torch.zeros(4)}, queue_path)  # expect: DDP005
