# ruff: noqa
# Near misses: LOCAL_RANK from the environment; both spellings with the environment as default.
import argparse
import os

parser = argparse.ArgumentParser()
parser.add_argument("--local-rank", "--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", 0)))
parser.add_argument("--rank-file", help="not a rank")
local_rank = int(os.environ["LOCAL_RANK"])
