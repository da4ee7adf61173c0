# ruff: noqa
# Near misses: a class whose forward ends in a Softmax that the script never builds (the model it trains is
# another), and an nn.Sequential with a Softmax that is built but never called.
import torch
import torch.nn as nn
import torchvision


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)
        self.out = nn.Softmax(dim=1)

    def forward(self, x):
        return self.out(self.fc(x))


# model = Classifier()
probe = nn.Sequential(nn.Linear(8, 3), nn.Softmax(dim=1))
model = torchvision.models.resnet18(num_classes=3)
loss_fn = nn.CrossEntropyLoss()
x, y = torch.randn(2, 3, 32, 32), torch.tensor([0, 1])
loss = loss_fn(model(x), y)
