"""The device policy (lesson 04): one pure function, `choose_device`, the same in every script that joins
a process group, and decided the same way by every rank of a machine. It is tested directly for
machines with 0, 1, 2 and 8 GPUs and 1 to 4 processes, which needs no GPU.

This machine has no GPU, so the scripts' handling of a "fewer GPUs than processes" machine is tested
with a stand-in: torch.cuda.is_available and torch.cuda.device_count are replaced for the duration of
the test to answer like a one-GPU machine. Nothing of CUDA itself runs here; `make gpu-check` runs the
real GPU path on a machine that has one.
"""

import ast
import sys

import pytest
import torch
import torch.distributed as dist
from conftest import NOTEBOOKS, SCRIPTS
from test_scripts import CASES, _load  # _load: import a script once, main() not run

SINGLE_PROCESS = {"01_single_device.py", "03_data_parallel.py"}  # no process group: the GPU if there is one
NO_DEVICE = {"10_signal_report.py"}  # launched by torchrun, but it only logs the signals it gets: no torch at all
DISTRIBUTED = sorted(set(CASES) - SINGLE_PROCESS - NO_DEVICE)


@pytest.mark.parametrize("name", sorted(NO_DEVICE))
def test_scripts_without_a_device_touch_neither_torch_nor_a_process_group(name):
    """The scripts left out of the device policy must really have no device to choose."""
    text = (SCRIPTS / name).read_text()
    assert "import torch" not in text and "init_process_group" not in text, name
GPUS, PROCESSES = (0, 1, 2, 8), (1, 2, 3, 4)


def _definition(path, function):
    source = path.read_text()
    found = [node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef) and node.name == function]
    return ast.get_source_segment(source, found[0]) if found else None


choose_device = _load("04_ddp_train.py").choose_device


def test_every_distributed_script_has_the_one_policy():
    """Scripts are copied alone, so each carries its own copy: the copies must not drift apart."""
    reference = _definition(SCRIPTS / "04_ddp_train.py", "choose_device")
    assert reference, "04_ddp_train.py defines choose_device"
    differing = [name for name in DISTRIBUTED if _definition(SCRIPTS / name, "choose_device") != reference]
    assert not differing, f"choose_device differs from 04_ddp_train.py's in {differing}"
    for name in DISTRIBUTED:
        assert "torch.cuda.is_available():" not in (SCRIPTS / name).read_text(), (
            f"{name} decides the device by itself somewhere; use choose_device")


@pytest.mark.parametrize("gpus", GPUS)
@pytest.mark.parametrize("processes", PROCESSES)
def test_policy(gpus, processes):
    decisions = []
    for local_rank in range(processes):
        try:
            decisions.append(choose_device(gpus > 0, gpus, local_rank, processes))
        except ValueError as error:
            decisions.append(str(error))
    if gpus == 0:
        assert decisions == [("gloo", "cpu")] * processes, decisions
    elif gpus >= processes:
        assert decisions == [("nccl", f"cuda:{r}") for r in range(processes)], decisions
    else:  # every rank refuses, with the same one line naming both counts and the three ways out
        message = decisions[0]
        assert decisions == [message] * processes, decisions
        assert isinstance(message, str) and "\n" not in message, message
        for part in (f"{processes} processes", f"{gpus} GPU(s)", "--nproc_per_node=gpu",
                     f"fewer processes (at most {gpus})", "--device cpu"):
            assert part in message, (part, message)
    assert len({d[0] if isinstance(d, tuple) else d for d in decisions}) == 1, f"ranks disagree: {decisions}"


@pytest.mark.parametrize("gpus", GPUS)
@pytest.mark.parametrize("processes", PROCESSES)
def test_asking_for_the_cpu_always_gets_gloo(gpus, processes):
    assert all(choose_device(gpus > 0, gpus, r, processes, wanted="cpu") == ("gloo", "cpu")
               for r in range(processes))


def test_cuda_without_a_device_is_the_cpu():
    assert choose_device(True, 0, 0, 2) == ("gloo", "cpu")


@pytest.mark.parametrize("name", DISTRIBUTED)
@pytest.mark.parametrize("local_rank", (0, 1))
@pytest.mark.filterwarnings("ignore:Unable to enable fault handler")  # 08's @record, run in-process
def test_too_few_gpus_is_one_line_and_exit_code_2(name, local_rank, tmp_path, monkeypatch, capsys):
    """Stand-in for a one-GPU machine running 2 processes: the script stops before any CUDA call or any
    work, local rank 0 says why in one line, and every rank exits with code 2."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: pytest.fail(f"set_device({device}) was called"))
    for variable in ("RANK", "WORLD_SIZE", "TORCHELASTIC_ERROR_FILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("LOCAL_RANK", str(local_rank))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [name, *CASES[name]["args"], "--out", str(tmp_path / "out.json")])
    module = _load(name)
    with pytest.raises(SystemExit) as exited:
        module.main()
    captured = capsys.readouterr()
    assert exited.value.code == 2, (exited.value.code, captured.err)
    assert not dist.is_initialized(), "the process group must not have been joined"
    assert captured.out == "", f"no work before the error: {captured.out[-2000:]}"
    if local_rank == 0:
        assert captured.err.count("\n") == 1, captured.err
        assert captured.err.startswith(f"{name}: error: 2 processes on this machine but 1 GPU(s): "), captured.err
    else:
        assert captured.err == "", f"only local rank 0 explains: {captured.err}"
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("name", DISTRIBUTED)
def test_every_script_takes_device_cpu(name, monkeypatch, tmp_path):
    """--device cpu is the way out the error names, so every script that joins a process group takes it (next to
    its quick run's arguments: 13_sharded_checkpoint.py, for one, needs --save or --load)."""
    monkeypatch.chdir(tmp_path)  # an argument type may create what it names (--save DIR)
    for variable in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(variable, raising=False)
    module = _load(name)
    for device in ("cpu", "auto"):
        monkeypatch.setattr(sys, "argv", [name, *CASES[name]["args"], "--device", device])
        assert module.parse_args().device == device


# The lessons' side (notebooks/devices.py): the same answers, from the scripts' own function.
sys.path.insert(0, str(NOTEBOOKS))
import devices  # noqa: E402


@pytest.mark.parametrize("gpus", GPUS)
@pytest.mark.parametrize("processes", PROCESSES)
def test_lessons_fall_back_to_the_cpu_and_say_so(gpus, processes, capsys):
    device = devices.device_for(processes, gpus=gpus, cuda_available=gpus > 0)
    said = capsys.readouterr().out
    if 0 < gpus < processes:
        assert device == "cpu", device
        assert said.count("\n") == 1 and f"{processes} processes but {gpus} GPU(s)" in said, said
        assert devices.backend_for(device, cuda_available=True) == "gloo"
    else:
        assert device == "auto" and said == "", (device, said)
        assert devices.backend_for(device, cuda_available=gpus > 0) == ("nccl" if gpus else "gloo")


def test_lessons_use_the_scripts_policy():
    assert devices.choose_device.__code__.co_code == choose_device.__code__.co_code
