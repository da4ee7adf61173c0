# ruff: noqa
# Near miss: the weights' seed is set here, and a helper of another file seeds again (it adds the rank there,
# where this file cannot see it).
import misc
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms

dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(torch.nn.Linear(10, 10))
misc.fix_random_seeds(0)
train_set = datasets.ImageFolder("data/train", transform=transforms.RandomResizedCrop(224))
loader = DataLoader(train_set, batch_size=64, sampler=DistributedSampler(train_set), num_workers=8)
