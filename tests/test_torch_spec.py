"""The Makefile honours TORCH_SPEC (tools/torch_spec.py): a torch that does not satisfy it is replaced, or
one line says why not; a torch that satisfies it is left alone, quickly.

The make test runs on a throwaway venv holding a STAND-IN torch: tiny wheels named torch (2.13.0+cpu,
2.15.0) that contain nothing but a version, installed by pip from a folder of the test (no index, no
network, no machine-wide pip configuration). Real torch builds are never installed here."""

import base64
import hashlib
import os
import subprocess
import sys
import zipfile

import pytest
from conftest import REPO
from torch_spec import decide


@pytest.mark.parametrize(("installed", "spec", "action"), [
    ("2.13.0+cpu", "torch==2.13.0", "keep"),  # the default spec: no reinstall on every make
    ("2.13.0+cpu", "torch>=2.10", "keep"),
    ("2.13.0+cpu", "torch==2.15.0", "install"),  # CPU build -> another spec
    ("2.15.0", "torch==2.13.0", "install"),  # ... and back
    ("2.15.0", "torch>=2.10,<2.14", "install"),
    ("2.16.0.dev20261201", "torch>=2.10", "keep"),  # a nightly satisfies a range
    ("2.13.0+cpu", "torch", "upgrade"),  # a bare name asks for the newest, not for any
    (None, "torch==2.13.0", "install"),  # a new venv
    ("2.13.0+cpu", "/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "keep"),
    ("2.13.0+cpu", "/wheels/torch-2.13.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl", "install"),  # another build
    ("2.13.0+cpu", "torch @ https://example.org/torch.tar.gz", "install"),  # only pip can tell
])
def test_decide(installed, spec, action):
    assert decide(installed, spec) == action


@pytest.mark.parametrize("spec", ["numpy==2.0", "torch===", "notawheel.whl", "/w/torchvision-0.29.1-py3-none-any.whl"])
def test_decide_refuses_what_is_not_torch(spec):
    with pytest.raises(ValueError, match="TORCH_SPEC="):
        decide("2.13.0+cpu", spec)


def stand_in_wheel(folder, version):
    """A wheel named torch that holds only its version (a stand-in, not PyTorch)."""
    files = {"torch/__init__.py": f"__version__ = {version!r}  # a stand-in for tests/test_torch_spec.py\n",
             f"torch-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
             f"torch-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                 "Tag: py3-none-any\n"}
    record = f"torch-{version}.dist-info/RECORD"
    lines = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(text.encode())}")
    files[record] = "\n".join(lines + [f"{record},,"]) + "\n"
    with zipfile.ZipFile(folder / f"torch-{version}-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)


def test_make_reinstalls_torch_or_says_why_not(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("2.13.0+cpu", "2.15.0"):
        stand_in_wheel(wheels, version)
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "TORCH_SPEC", "MAKE"))}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "torch==2.13.0+cpu"], env=env, check=True, timeout=120)
    (venv / ".ready").touch()  # the rest of the environment counts as installed: only torch is under test

    def make(*spec):
        result = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "env", f"VENV={venv}", *spec],
                                env=env, capture_output=True, text=True, timeout=180)
        torch = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return result.returncode, result.stdout + result.stderr, torch

    rc, output, torch = make("TORCH_SPEC=torch==2.15.0")  # the CPU build -> another version
    print(output)
    assert (rc, torch) == (0, "2.15.0"), (rc, torch, output)
    assert "torch 2.13.0+cpu here does not satisfy TORCH_SPEC=torch==2.15.0: installing it" in output, output

    rc, output, torch = make()  # and back, with the Makefile's default spec
    assert (rc, torch) == (0, "2.13.0+cpu"), (rc, torch, output)
    assert "torch 2.15.0 here does not satisfy TORCH_SPEC=torch==2.13.0: installing it" in output, output

    rc, output, torch = make()  # satisfied: nothing to do, nothing said, pip not run
    assert (rc, output, torch) == (0, "", "2.13.0+cpu"), (rc, output, torch)

    rc, output, torch = make("TORCH_SPEC=torch==2.16.0")  # nothing pip can find: stop with one line
    print(output)
    last = [line for line in output.strip().splitlines() if not line.startswith("make: ***")][-1]  # make's own marker
    assert rc != 0 and torch == "2.13.0+cpu", (rc, torch, output)
    assert last.startswith("torch_spec: torch 2.13.0+cpu is installed, TORCH_SPEC=torch==2.16.0 asks for another"), last
    assert last.endswith("keep this one: make env TORCH_SPEC=torch==2.13.0"), last

    rc, output, torch = make("TORCH_SPEC=torch")  # a bare name: the newest torch, not whatever is there
    assert (rc, torch) == (0, "2.15.0"), (rc, torch, output)
