# ruff: noqa
# Near miss: the GPU list comes from a command-line option, set by the parent before it starts its
# workers with mp.spawn: whoever runs the script chooses the GPUs, and no worker exists yet.
import argparse
import os

import torch.multiprocessing as mp


def worker(index, args):
    print(index, args.devices)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", type=str, default="0,1")
    args = parser.parse_args()
    os.environ["CUDA_VISIBLE_DEVICES"] = args.devices
    mp.spawn(worker, nprocs=2, args=(args,))
