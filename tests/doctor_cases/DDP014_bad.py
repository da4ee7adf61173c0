# ruff: noqa
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=0)  # expect: DDP014
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
