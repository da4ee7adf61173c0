# ruff: noqa
# Before mp.spawn too, but a GPU list written in the script as a string still fires, and so does an option
# set after the workers were started (they never see it).
import argparse
import os

import torch.multiprocessing as mp


def worker(index, args):
    print(index, args.devices)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", type=str, default="0,1")
    args = parser.parse_args()
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"  # expect: DDP013
    mp.spawn(worker, nprocs=2, args=(args,))
    os.environ["CUDA_VISIBLE_DEVICES"] = args.devices  # expect: DDP013
