# ruff: noqa
# A library file read alone: nothing here calls save or load, but the file has no entry point (no
# `if __name__ == "__main__":`, no module-level call but of an imported module's function), so their callers
# are elsewhere: the load is reported.
import logging

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

logger = logging.getLogger(__name__)
torch.backends.cudnn.benchmark = True
logging.basicConfig(level=logging.INFO)


def wrap(model):
    return DDP(model)


def save(model, path):
    torch.save(model.state_dict(), path)  # ddp-doctor: ignore[DDP007]


def load(model, path):
    model.load_state_dict(torch.load(path))  # expect: DDP008
