"""Lesson 10: the SLURM batch script (syntax, what it launches, a dry run with stand-ins for srun and
scontrol) and the socket reader of 10_node_report.py. No cluster and no launch needed."""

import os
import re
import runpy
import socket
import subprocess
import sys

import pytest
from conftest import SCRIPTS

SBATCH = SCRIPTS / "10_slurm.sbatch"


def test_sbatch_syntax():
    result = subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_sbatch_directives_come_before_any_command():
    """sbatch stops reading #SBATCH lines at the first command: they must all come first."""
    lines = SBATCH.read_text().splitlines()
    assert lines[0] == "#!/bin/bash"
    first_command = next(i for i, line in enumerate(lines) if line.strip() and not line.startswith("#"))
    directives = [i for i, line in enumerate(lines) if line.startswith("#SBATCH")]
    assert directives and max(directives) < first_command
    text = "\n".join(lines[i] for i in directives)
    assert "--nodes=" in text and "--ntasks-per-node=1" in text  # one task (one torchrun agent) per node


def test_sbatch_runs_04_with_torchrun_and_c10d():
    text = SBATCH.read_text()
    command = re.search(r"^srun .*?torchrun(.*?)04_ddp_train\.py", text, re.S | re.M)
    assert command, "an `srun ... torchrun ... 04_ddp_train.py` command"
    flags = command.group(1)
    for flag in ("--nnodes=\"$SLURM_NNODES\"", "--rdzv-backend=c10d", "--rdzv-id=\"$SLURM_JOB_ID\"",
                 "--rdzv-endpoint=\"$head_node:$rdzv_port\"", "--nproc_per_node="):
        assert flag in flags, flag
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1' in text
    assert "29500" not in text and "--master-port" not in text and "--standalone" not in text
    assert re.search(r'04_ddp_train\.py .*--timeout "\$collective_timeout"', text), "a production --timeout"


def _dry_run(tmp_path, **env):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text('#!/bin/sh\nprintf "gpu-a17\\ngpu-b03\\n"\n')
    (fake / "srun").write_text('#!/bin/sh\necho "$@"\n')
    for tool in fake.iterdir():
        tool.chmod(0o755)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("SLURM_") and k not in ("RDZV_PORT", "NPROC_PER_NODE", "COLLECTIVE_TIMEOUT")}
    base.update(PATH=f"{fake}{os.pathsep}{os.environ['PATH']}", SLURM_JOB_ID="123456",
                SLURM_JOB_NODELIST="gpu-a17,gpu-b03", SLURM_NNODES="2", **env)
    result = subprocess.run(["bash", str(SBATCH)], env=base, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1].split()


def test_sbatch_dry_run_builds_the_torchrun_command(tmp_path):
    args = _dry_run(tmp_path, SLURM_GPUS_ON_NODE="8")
    assert args[:2] == ["--ntasks-per-node=1", "torchrun"], args
    assert "--nnodes=2" in args and "--nproc_per_node=8" in args and "--rdzv-id=123456" in args
    endpoint = next(a for a in args if a.startswith("--rdzv-endpoint="))
    host, port = endpoint.split("=", 1)[1].rsplit(":", 1)
    assert host == "gpu-a17"  # the head node: the first of the allocation
    assert 20000 <= int(port) <= 29999 and int(port) == 20000 + 123456 % 10000
    assert "04_ddp_train.py" in args
    # a production collective timeout, not the scripts' 60 s: at least NCCL's default of 10 minutes
    timeout = float(args[args.index("--timeout") + 1])
    assert args.index("--timeout") > args.index("04_ddp_train.py") and timeout >= 600, args


def test_sbatch_dry_run_overrides(tmp_path):
    args = _dry_run(tmp_path, RDZV_PORT="31337", NPROC_PER_NODE="3", COLLECTIVE_TIMEOUT="900")
    assert "--rdzv-endpoint=gpu-a17:31337" in args and "--nproc_per_node=3" in args
    assert args[args.index("--timeout") + 1] == "900", args


def test_sbatch_dry_run_without_gpus_starts_one_process(tmp_path):
    assert "--nproc_per_node=1" in _dry_run(tmp_path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_listening_sockets_reads_proc():
    listening_sockets = runpy.run_path(str(SCRIPTS / "10_node_report.py"))["listening_sockets"]
    opened, expected = [], []
    try:
        for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            sock = socket.socket(family)
            opened.append(sock)
            try:
                sock.bind((address, 0))
            except OSError:  # no IPv6 on this machine
                continue
            sock.listen()
            expected.append((address, sock.getsockname()[1]))
        found = listening_sockets(os.getpid())
    finally:
        for sock in opened:
            sock.close()
    assert len(expected) >= 2 and all(e in found for e in expected), (expected, found)
    assert listening_sockets(2**22 + 12345) is None  # no such process: "unknown", not a guess
