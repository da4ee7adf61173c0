# ruff: noqa
# Near misses: a model that comes in as a parameter (built elsewhere, maybe on meta); FSDP with a param_init_fn
# that materialises a deferred model; a model from a builder function the doctor cannot read.
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import fully_shard
from builders import build_model, materialize


def shard(model, mesh):
    for layer in model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def wrap(Net):
    return FSDP(Net(), param_init_fn=materialize)


def main(cfg):
    dist.init_process_group("gloo")
    model = build_model(cfg)
    fully_shard(model)
