# ruff: noqa
# Near misses: an MPI or a SLURM launch gives each process its own GPU from its rank, before CUDA starts.
import os

from mpi4py import MPI

os.environ["CUDA_VISIBLE_DEVICES"] = f"{MPI.COMM_WORLD.Get_rank() % 8}"
try:  # a SLURM launch: one GPU per task, from the task's local id
    os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["SLURM_LOCALID"]
except KeyError:
    pass
