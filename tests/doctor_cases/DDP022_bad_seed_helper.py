# ruff: noqa
# The seed goes through a helper of the file, still the same on every rank; the dataset draws its own
# augmentation in __getitem__; the worker count is a setting.
import random

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

SEED = 1234


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class NoisyCrops(Dataset):
    def __init__(self, images):
        self.images = images

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        top = np.random.randint(0, 8)
        return self.images[i][:, top:top + 24] + 0.01 * torch.randn(3, 24, 32)


def main(config):
    dist.init_process_group("gloo")
    set_seed(SEED)
    model = DDP(torch.nn.Linear(8, 8))
    data = NoisyCrops(torch.randn(100, 3, 32, 32))
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data),  # expect: DDP022
                        num_workers=config.workers)
    return model, loader
