# ruff: noqa
# Near miss, the everyday fix: the seed mixes in the rank (after the model is built, or through a helper that
# returns the rank), so every rank's default RNG, and so its workers' base_seed, differs.
import torch
import torch.distributed as dist
import utils
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms


def main(args):
    dist.init_process_group("gloo")
    torch.manual_seed(args.seed)  # equal initial weights
    model = DDP(torch.nn.Linear(10, 10))
    seed = args.seed + utils.get_rank()
    torch.manual_seed(seed)  # then a stream per rank
    train_set = datasets.ImageFolder(args.data, transform=transforms.RandomResizedCrop(224))
    loader = DataLoader(train_set, batch_size=64, sampler=DistributedSampler(train_set), num_workers=10)
    return model, loader
