# ruff: noqa
# Near misses: reading it; setting it for a child process only.
import os
import subprocess

visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
env = dict(os.environ, CUDA_VISIBLE_DEVICES="0")
subprocess.run(["nvidia-smi"], env=env)
os.environ["OMP_NUM_THREADS"] = "1"
