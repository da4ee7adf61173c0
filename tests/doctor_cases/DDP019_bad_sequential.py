# ruff: noqa
# A Softmax as the last layer of an nn.Sequential (module level or an attribute) feeding CrossEntropyLoss:
# each model is built and called.
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2), nn.Softmax(dim=1))  # expect: DDP019
loss_fn = nn.CrossEntropyLoss()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(8, 2), nn.Softmax(dim=-1))  # expect: DDP019


x, y = torch.randn(2, 8), torch.tensor([0, 1])
loss = loss_fn(model(x), y)
net = Net()
loss = loss + loss_fn(net(x), y)
