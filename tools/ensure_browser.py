"""Make sure Debian's Chromium is installed for the browser tests; never fail the build.

    python tools/ensure_browser.py

The browser tests (tests/test_browser.py) drive /usr/bin/chromium with Playwright. Playwright's
own browser download is not used: CI machines reach package registries only. If /usr/bin/chromium
is missing, this installs Debian's `chromium` package with apt-get (as root, or through sudo when
that needs no password). If that is impossible it prints why and exits 0: the browser tests then
skip, naming the reason written to build/browser-unavailable.txt (removed again once a browser works).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# chromium, and a small CJK font so the Chinese terms of the lessons show in screenshots.
PACKAGES = ["chromium", "fonts-wqy-zenhei"]
CJK_FONT = Path("/usr/share/fonts/truetype/wqy")
REASON_FILE = Path(__file__).resolve().parent.parent / "build" / "browser-unavailable.txt"


def _apt(prefix: list[str], *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run([*prefix, "apt-get", *args], env=env, capture_output=True, text=True, timeout=900)


def install() -> str | None:
    """Install chromium with apt-get; return None on success, else why it was not possible."""
    if shutil.which("apt-get") is None:
        return "apt-get is not available (not a Debian-like system)"
    if os.geteuid() == 0:
        prefix: list[str] = []
    elif shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        prefix = ["sudo", "-n"]
    else:
        return "not root and no password-less sudo: run `apt-get install -y chromium` as root"
    print(f"ensure_browser: installing {' '.join(PACKAGES)} with apt-get …", flush=True)
    try:
        first = _apt(prefix, "install", "-y", "--no-install-recommends", *PACKAGES)
        if first.returncode != 0:  # a fresh machine has no package lists yet
            update = _apt(prefix, "update")
            if update.returncode != 0:
                return f"apt-get update failed: {update.stderr.strip().splitlines()[-1:] or update.returncode}"
            second = _apt(prefix, "install", "-y", "--no-install-recommends", *PACKAGES)
            if second.returncode != 0:
                tail = second.stderr.strip().splitlines()[-1:] or [f"exit code {second.returncode}"]
                return f"apt-get install chromium failed: {tail[0]}"
    except (OSError, subprocess.SubprocessError) as error:
        return f"apt-get could not run: {error}"
    if not CHROMIUM.exists():
        return f"apt-get installed chromium but {CHROMIUM} does not exist"
    return None


def main() -> int:
    if CHROMIUM.exists() and CJK_FONT.exists():
        reason = None
    else:
        reason = install()
    if reason is None:
        try:
            version = subprocess.run([str(CHROMIUM), "--version"], capture_output=True, text=True, timeout=60)
            if version.returncode != 0:
                reason = f"{CHROMIUM} --version failed: {(version.stderr or version.stdout).strip()[-300:]}"
        except (OSError, subprocess.SubprocessError) as error:
            reason = f"{CHROMIUM} does not run: {error}"
    if reason is None:
        REASON_FILE.unlink(missing_ok=True)
        print(f"ensure_browser: {version.stdout.strip() or CHROMIUM} is ready", flush=True)
    else:
        REASON_FILE.parent.mkdir(parents=True, exist_ok=True)
        REASON_FILE.write_text(reason + "\n")
        print(f"ensure_browser: no browser, the browser tests will be skipped: {reason}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
