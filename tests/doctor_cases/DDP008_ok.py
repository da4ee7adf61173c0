# ruff: noqa
# Near misses: map_location by keyword or position; **options; a script that is not distributed.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
a = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)
b = torch.load("checkpoint.pt", "cpu", weights_only=True)
options = dict(map_location="cpu", weights_only=True)
c = torch.load("checkpoint.pt", **options)
