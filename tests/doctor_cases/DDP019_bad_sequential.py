# ruff: noqa
# A Softmax as the last layer of an nn.Sequential (module level or an attribute) feeding CrossEntropyLoss.
import torch.nn as nn

model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2), nn.Softmax(dim=1))  # expect: DDP019
loss_fn = nn.CrossEntropyLoss()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(8, 2), nn.Softmax(dim=-1))  # expect: DDP019
