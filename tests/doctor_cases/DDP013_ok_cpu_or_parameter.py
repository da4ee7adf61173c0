# ruff: noqa
# Near misses: "-1" hides every GPU for a CPU run; a list passed in by the caller (a --device option read
# elsewhere) is chosen outside this file, and the doctor cannot read it.
import os


def select_device(device=""):
    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
    elif device:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
