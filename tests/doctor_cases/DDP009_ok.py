# ruff: noqa
import torch

state = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)
print("weights_only=False would run the file's code")
