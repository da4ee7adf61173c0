# ruff: noqa
# Near miss: an MPI launch gives each process its own GPU from its rank, before anything touches CUDA.
import os

from mpi4py import MPI

os.environ["CUDA_VISIBLE_DEVICES"] = f"{MPI.COMM_WORLD.Get_rank() % 8}"
