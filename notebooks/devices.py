"""The lessons' side of the device policy: which ``--device`` to launch N processes with.

Every script in ``ddp_scripts/`` decides its backend and device with ``choose_device`` (lesson 04):
NCCL and ``cuda:LOCAL_RANK`` where CUDA has a GPU for every process on the machine, gloo and the CPU
without CUDA, and a one-line error (exit code 2) where there are fewer GPUs than processes. A lesson
that wants more processes than this machine has GPUs does not stop there: it launches them on the
CPU with ``--device cpu`` and says so in one printed line. ``device_for`` asks the scripts' own
``choose_device``, so a lesson and its scripts cannot disagree.

Lessons import it next to the notebook: ``from devices import device_for, backend_for``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

__all__ = ["choose_device", "device_for", "backend_for"]

_SCRIPT = Path(__file__).resolve().parent.parent / "ddp_scripts" / "04_ddp_train.py"
_spec = importlib.util.spec_from_file_location("ddp_train_04", _SCRIPT)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)  # defines functions only: main() runs under `if __name__ == "__main__"`
choose_device = _module.choose_device  # the policy every script uses, taught in lesson 04


def device_for(processes: int, gpus: int | None = None, cuda_available: bool | None = None) -> str:
    """``"auto"`` where the scripts can run ``processes`` processes here as they are (on a GPU each, or
    on the CPU where there is no CUDA); ``"cpu"``, with one printed line, where the GPUs are too few."""
    gpus = torch.cuda.device_count() if gpus is None else gpus
    cuda_available = torch.cuda.is_available() if cuda_available is None else cuda_available
    try:
        choose_device(cuda_available, gpus, 0, processes)
        return "auto"
    except ValueError:
        print(f"{processes} processes but {gpus} GPU(s) here: this launch runs on the CPU (--device cpu, gloo); "
              f"with at most {gpus} process(es) it would use the GPUs")
        return "cpu"


def backend_for(device: str, cuda_available: bool | None = None) -> str:
    """The backend a script launched with ``--device device`` picks on this machine."""
    cuda_available = torch.cuda.is_available() if cuda_available is None else cuda_available
    return "nccl" if device == "auto" and cuda_available else "gloo"
