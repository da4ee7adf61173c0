# ruff: noqa
# Near miss, the FSDP2 idiom: shapes on the meta device, shard, then materialise this rank's shard and initialise it.
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from model import Transformer

dist.init_process_group("gloo")
with torch.device("meta"):
    model = Transformer(dim=4096, layers=48)
for layer in model.layers:
    fully_shard(layer)
fully_shard(model)
model.to_empty(device="cpu")
model.init_weights()
