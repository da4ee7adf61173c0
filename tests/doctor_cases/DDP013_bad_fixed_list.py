# ruff: noqa
# A fixed list chosen inside the script (the same for every process): fires.
import os

os.environ["CUDA_VISIBLE_DEVICES"] = "0,2"  # expect: DDP013
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "1")  # expect: DDP013
