# ruff: noqa
# Near miss: a file with an epoch loop and no set_epoch, whose shuffling DistributedSampler feeds a prediction
# loader read in one pass (a new loader per task, the function called once per checkpoint): no second pass
# whose order set_epoch could change.
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, SequentialSampler, TensorDataset


def fit(model, data, epochs):
    loader = DataLoader(data, sampler=DistributedSampler(data, shuffle=False), batch_size=8)
    for epoch in range(epochs):
        for x, in loader:
            model(x).sum().backward()


def predict(model, tasks, local_rank):
    outputs = []
    for task in tasks:
        data = TensorDataset(torch.randn(32, 4) + task)
        sampler = SequentialSampler(data) if local_rank == -1 else DistributedSampler(data)
        loader = DataLoader(data, sampler=sampler, batch_size=8)
        print(len(loader))
        for x, in loader:
            outputs.append(model(x))
    return outputs


def main(checkpoints):
    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    fit(model, TensorDataset(torch.randn(32, 4)), 3)
    for checkpoint in checkpoints:
        model.load_state_dict(torch.load(checkpoint, map_location="cpu"))
        predict(model, [0, 1], dist.get_rank())
