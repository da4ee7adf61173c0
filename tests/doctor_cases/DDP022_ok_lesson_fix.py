# ruff: noqa
# Near miss, lesson 12's fix: the same seed for the weights, and a DataLoader generator seeded apart on every rank.
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms

dist.init_process_group("gloo")
rank = dist.get_rank()
seed = 0
torch.manual_seed(seed)
model = DDP(torch.nn.Linear(10, 10))
train_set = datasets.CIFAR10("data", transform=transforms.RandomCrop(32, padding=4))
loader = DataLoader(train_set, sampler=DistributedSampler(train_set), num_workers=4,
                    generator=torch.Generator().manual_seed(seed + 1000 * rank))
