"""Soak: launch every script many times in a row and count the launches that fail.

    python tools/soak.py [--runs 50] [--nprocs 2] [--only 04_ddp_train.py ...]

A DDP script that exits uncleanly (e.g. gloo's "terminate called without an active exception" after
a bare destroy_process_group()) fails only sometimes, so one green launch proves little. Each script
runs with the quick arguments from tests/test_scripts.py. Results: build/bench/soak.json.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from test_scripts import CASES  # noqa: E402  (the quick arguments of every script)


def launch(name, nprocs, workdir):
    case = CASES[name]
    script = [str(REPO / "ddp_scripts" / name), *case["args"]]
    if case.get("out"):
        script += ["--out", str(Path(workdir) / "out.json")]
    if case.get("nprocs", (1,)) == ():
        cmd = [sys.executable, *script]
    else:
        cmd = [str(Path(sys.executable).parent / "torchrun"), "--standalone", f"--nproc_per_node={nprocs}", *script]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    try:
        result = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return False, "timed out after 300 s"
    ok = result.returncode == 0 and "terminate called" not in result.stderr
    return ok, "" if ok else result.stderr.strip().splitlines()[-1:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--only", nargs="+", help="script file names")
    args = parser.parse_args()
    if args.runs < 1 or args.nprocs < 1:
        parser.error("--runs and --nprocs must be positive")
    names = args.only or sorted(CASES)
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        parser.error(f"unknown script(s): {', '.join(unknown)}")
    out = REPO / "build" / "bench" / "soak.json"
    results = json.loads(out.read_text()) if out.exists() else {}
    for name in names:
        failures, started = [], time.perf_counter()
        with tempfile.TemporaryDirectory() as workdir:
            for i in range(args.runs):
                ok, why = launch(name, args.nprocs, workdir)
                if not ok:
                    failures.append((i, why))
        seconds = time.perf_counter() - started
        results[name] = dict(runs=args.runs, nprocs=args.nprocs, failures=len(failures),
                             first_failures=failures[:3], seconds_per_launch=round(seconds / args.runs, 2))
        print(f"{name:32s} {len(failures)}/{args.runs} failed  ({seconds / args.runs:.1f} s per launch)", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1))
    return 1 if any(results[n]["failures"] for n in names) else 0


if __name__ == "__main__":
    sys.exit(main())
