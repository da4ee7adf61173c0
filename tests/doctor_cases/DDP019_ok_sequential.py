# ruff: noqa
# Near misses: a Softmax inside a Sequential, not at its end (attention weights); LogSoftmax last with NLLLoss.
import torch.nn as nn

gate = nn.Sequential(nn.Linear(8, 8), nn.Softmax(dim=-1), nn.Dropout(0.1), nn.Linear(8, 2))
classifier = nn.Sequential(nn.Linear(8, 2), nn.LogSoftmax(dim=1))
loss_fn = nn.NLLLoss()
other_loss = nn.CrossEntropyLoss()
