# ruff: noqa
# FSDP (the first API) wrapping a model constructed in place, on every rank.
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from transformers import AutoModelForCausalLM

dist.init_process_group("gloo")
sharded = FSDP(AutoModelForCausalLM.from_pretrained("some/model").cuda(),  # expect: DDP023
               sync_module_states=True)
