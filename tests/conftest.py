"""Shared fixtures: where the repository is, and how to run a command with this environment."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"
SCRIPTS = REPO / "ddp_scripts"
BIN = Path(sys.executable).parent
sys.path.insert(0, str(REPO / "tools"))


def env_with_bin():
    """This interpreter's bin/ first on PATH, so `torchrun` is this environment's."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(cmd, cwd, timeout=240):
    """Run a command; never hang a test run."""
    return subprocess.run(cmd, cwd=cwd, env=env_with_bin(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def repo():
    return REPO
