# ruff: noqa
# Near misses: a log_softmax before CrossEntropyLoss is redundant, not wrong: log_softmax is idempotent,
# so cross_entropy(log_softmax(z)) equals cross_entropy(z), loss and gradients alike.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(6, 4)

    def forward(self, x):
        return F.log_softmax(self.head(x), dim=-1)


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 4)
        self.softmax = nn.LogSoftmax(dim=1)  # named softmax, but a log_softmax

    def forward(self, x):
        return self.softmax(self.proj(x))


criterion = nn.CrossEntropyLoss()
clf, tagger = Classifier(), Tagger()
head = nn.Sequential(nn.Linear(6, 4), nn.LogSoftmax(dim=1))
x, y = torch.randn(3, 6), torch.tensor([0, 2, 1])
loss = criterion(clf(x), y) + criterion(tagger(x), y) + criterion(head(x), y)
loss = loss + F.cross_entropy(x.log_softmax(1), y) + criterion(torch.log_softmax(x, dim=1), y)
