# ruff: noqa
# A GPU list as an argparse default: written in the script, used on every run that does not override it.
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--gpu-ids", type=str, default="0,2")
args = parser.parse_args()
os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu_ids  # expect: DDP013
