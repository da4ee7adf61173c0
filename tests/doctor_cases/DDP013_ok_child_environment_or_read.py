# ruff: noqa
# Near misses: a launcher that gives a child process its GPUs through a copy of the environment (the child is
# started with them: nothing overrides a launcher's choice), and a script that only reads the variable.
import argparse
import os
import subprocess

parser = argparse.ArgumentParser()
parser.add_argument("--gpu-ids", type=str, default="0,2")
args = parser.parse_args()
env = os.environ.copy()
env["CUDA_VISIBLE_DEVICES"] = args.gpu_ids
env.update(CUDA_VISIBLE_DEVICES="0,2")
subprocess.run(["torchrun", "--nproc_per_node=2", "train.py"], env=env, check=True)
visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
print(len(visible.split(",")), os.environ.setdefault("OMP_NUM_THREADS", "1"))
