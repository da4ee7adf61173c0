# ruff: noqa
# Near misses: the GPU list comes from the command line (an argparse option, even with a list as its default)
# or from a configuration: the person running the script chose it, through another door than the launcher's.
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--gpu-ids", type=str, default="0,2")
args = parser.parse_args()
os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu_ids
cfg = load_config(args.config)
os.environ["CUDA_VISIBLE_DEVICES"] = str(cfg.gpus)
os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(cfg["gpus"])
os.environ.update(CUDA_VISIBLE_DEVICES=args.gpu_ids)
