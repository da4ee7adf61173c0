# ruff: noqa
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        out = self.softmax(self.fc(x))  # expect: DDP019
        return out


loss_fn = nn.CrossEntropyLoss()
logits = torch.randn(2, 3)
loss = loss_fn(torch.softmax(logits, dim=1), torch.tensor([0, 1]))  # expect: DDP019
loss = F.cross_entropy(logits.softmax(1), torch.tensor([0, 1]))  # expect: DDP019
model = Net()
x, y = torch.randn(2, 4), torch.tensor([0, 1])
loss = loss_fn(model(x), y)
