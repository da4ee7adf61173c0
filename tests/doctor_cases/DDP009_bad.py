# ruff: noqa
import torch

state = torch.load("checkpoint.pt", map_location="cpu", weights_only=False)  # expect: DDP009
