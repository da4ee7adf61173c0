# ruff: noqa
# Near miss: the same seed on every rank and workers, but nothing random in the data: every worker reads fixed
# token windows, so equal worker seeds draw nothing that could repeat.
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Windows(Dataset):
    def __init__(self, tokens, length):
        self.tokens, self.length = tokens, length

    def __len__(self):
        return len(self.tokens) // self.length

    def __getitem__(self, i):
        chunk = self.tokens[i * self.length:(i + 1) * self.length + 1]
        return chunk[:-1], chunk[1:]


dist.init_process_group("gloo")
torch.manual_seed(1337)
model = DDP(torch.nn.Linear(8, 8))
data = Windows(torch.arange(10_000), 128)
loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data), num_workers=4)
