"""Make the environment's torch the one TORCH_SPEC names (the Makefile runs this on every target).

    .venv/bin/python tools/torch_spec.py 'torch==2.15.0'

Run it with the environment's own Python: it looks at that environment's installed torch (its
metadata, without importing torch, so the usual case costs a fraction of a second).

- The installed torch satisfies the spec: nothing is done and nothing printed.
- It does not (another version, or no torch yet): one line says so, and pip installs the spec.
- The spec is a bare `torch` (no version): pip installs the newest torch (`pip install --upgrade`),
  as a learner who asks for "torch" expects; a bare name would otherwise be met by any torch, the
  CPU build included.
- pip fails, or leaves a torch that still does not satisfy the spec: exit 1, and the last line
  names the installed version, the spec, and the command that fixes it.
A spec that is not a requirement for torch: a one-line error, exit 2.
"""

import argparse
import subprocess
import sys
from importlib import metadata

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from packaging.version import Version
except ImportError:  # a venv that has only pip yet: pip carries its own copy of packaging
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement
    from pip._vendor.packaging.utils import InvalidWheelFilename, parse_wheel_filename
    from pip._vendor.packaging.version import Version

PIP = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check"]


def installed_torch() -> str | None:
    """The version of torch in this Python's environment, e.g. '2.13.0+cpu'; None without torch."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def parse_spec(spec: str) -> Requirement | str:
    """A requirement for torch (`torch`, `torch==2.15.0`, `torch>=2.10,<3`, `torch @ URL`), or a wheel's
    path or URL (returned as the string). Anything else raises ValueError."""
    text = spec.strip()
    if text.endswith(".whl"):
        try:
            name, *_ = parse_wheel_filename(text.rsplit("/", 1)[-1])
        except InvalidWheelFilename as error:
            raise ValueError(f"TORCH_SPEC={spec!r} is not a wheel's file name: {error}") from None
        if name != "torch":
            raise ValueError(f"TORCH_SPEC={spec!r} is a wheel of {name}, not of torch")
        return text
    try:
        requirement = Requirement(text)
    except InvalidRequirement as error:
        raise ValueError(f"TORCH_SPEC={spec!r} is not a pip requirement: {str(error).splitlines()[0]}") from None
    if requirement.name.lower() != "torch":
        raise ValueError(f"TORCH_SPEC={spec!r} names {requirement.name}, not torch")
    return requirement


def decide(installed: str | None, spec: str) -> str:
    """What to do: 'keep' (satisfied), 'install' (pip install SPEC) or 'upgrade' (pip install --upgrade SPEC)."""
    wanted = parse_spec(spec)
    if installed is None:
        return "install"
    if isinstance(wanted, str):  # a wheel: satisfied by exactly its version, build label included
        version = parse_wheel_filename(wanted.rsplit("/", 1)[-1])[1]
        return "keep" if version == Version(installed) else "install"
    if wanted.url:  # `torch @ URL`: only pip can tell what it holds
        return "install"
    if not wanted.specifier:  # a bare `torch`: the newest one
        return "upgrade"
    return "keep" if wanted.specifier.contains(installed, prereleases=True) else "install"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", help="a pip requirement for torch, e.g. torch==2.13.0, or a torch wheel")
    parser.add_argument("--retry", default="make", help="the command the error message suggests (the make target)")
    args = parser.parse_args()
    installed = installed_torch()
    try:
        action = decide(installed, args.spec)
    except ValueError as error:
        parser.error(str(error))
    if action == "keep":
        return 0
    have = f"torch {installed}" if installed else "no torch"
    if action == "install":
        print(f"{have} here does not satisfy TORCH_SPEC={args.spec}: installing it" if installed else
              f"no torch here yet: installing TORCH_SPEC={args.spec}", flush=True)
    else:
        print(f"TORCH_SPEC={args.spec} names no version: installing the newest torch ({have} here now)", flush=True)
    pip = PIP + (["--upgrade"] if action == "upgrade" else []) + [args.spec]
    failed = subprocess.run(pip).returncode
    now = installed_torch()
    if failed or now is None or decide(now, args.spec) == "install":
        why = "pip failed (above)" if failed else "pip did not install it"
        keep = f"; or keep this one: {args.retry} TORCH_SPEC=torch=={Version(now).public}" if now else ""
        print(f"torch_spec: torch {now or '(none)'} is installed, TORCH_SPEC={args.spec} asks for another and {why}: "
              f"name a torch pip can install here{keep}", file=sys.stderr)
        return 1
    if now != installed:
        print(f"torch {now} installed (was: {installed or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
