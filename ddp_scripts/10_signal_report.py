"""10 · Where a signal goes: every worker logs each signal it receives, with its pid, its agent and the sender.

    srun --ntasks-per-node=1 torchrun --nnodes=2 --nproc_per_node=2 --rdzv-backend=c10d \
        --rdzv-endpoint=HEAD:PORT --rdzv-id=JOB 10_signal_report.py --events signals.jsonl --timeout 60
    scancel --signal=USR1 JOBID        # then read signals.jsonl
    python 10_signal_report.py --events signals.jsonl --timeout 1   # also works: one process, no signal

Each worker blocks SIGUSR1 and SIGTERM and takes them with sigtimedwait, which also says which process
sent each one (si_pid): slurmstepd when SLURM signals a job step, the torchrun agent when it passes a
signal on. It appends one JSON line per event to --events: "ready" when it waits, "signal" for each
signal (with the sender's pid and name), "exit" when it ends on its own. On SIGUSR1 it does what a
preempted worker does: it takes --save seconds (a step and a snapshot), then exits 0, and logs its parent
by then (its agent, or whoever adopted it if the agent died). A worker that SIGKILL ends logs no "exit".
Without a signal it exits 0 after --timeout seconds (nothing hangs). With --out, rank 0 also writes its own
story as JSON. No process group and no torch: this is about processes and signals only.

Written by notebooks/10_multi_node.ipynb — edit it there.
"""

import argparse
import json
import math
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

WATCHED = {signal.SIGUSR1, signal.SIGTERM}


def who(pid):
    """The program name of process pid (its /proc comm: 'slurmstepd', 'pt_elastic' for a torchrun agent, …),
    or '?' if it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def log_event(path, **event):
    """Append one JSON line (one write, so lines of several processes never mix)."""
    line = json.dumps(dict(event, time=time.time())) + "\n"
    with open(path, "a") as log:
        log.write(line)


def wait_for_signals(args):
    """Log "ready", then every SIGUSR1/SIGTERM and who sent it; exit after SIGUSR1 + --save s, SIGTERM, or --timeout."""
    me = dict(role="worker", rank=int(os.environ.get("RANK", 0)), local_rank=int(os.environ.get("LOCAL_RANK", 0)),
              node=os.environ.get("SLURMD_NODENAME", socket.gethostname()), pid=os.getpid(), agent_pid=os.getppid())
    log_event(args.events, event="ready", **me)
    deadline = time.monotonic() + args.timeout
    ending, received = "timeout", []
    while time.monotonic() < deadline:
        info = signal.sigtimedwait(WATCHED, max(0.0, deadline - time.monotonic()))
        if info is None:
            break
        name = signal.Signals(info.si_signo).name
        received.append(dict(signal=name, sender_pid=info.si_pid, sender=who(info.si_pid)))
        log_event(args.events, event="signal", signal=name, sender_pid=info.si_pid, sender=who(info.si_pid), **me)
        if info.si_signo == signal.SIGTERM:
            ending = "SIGTERM"
            break
        if ending != "SIGUSR1":  # the first SIGUSR1: finish the step, save, then exit (later ones are logged)
            ending, deadline = "SIGUSR1", time.monotonic() + args.save
    parent = os.getppid()  # the agent, unless it has died: then whoever adopted this orphan
    log_event(args.events, event="exit", after=ending, agent_alive=parent == me["agent_pid"], parent_pid=parent,
              parent=who(parent), **me)
    if args.out and me["rank"] == 0:
        args.out.write_text(json.dumps(dict(me, world_size=int(os.environ.get("WORLD_SIZE", 1)), signals=received,
                                            after=ending), indent=1))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=writable_file, required=True,
                        help="every worker appends its events here, one JSON line each")
    parser.add_argument("--timeout", type=positive_float, default=60.0,
                        help="seconds to wait for a signal before exiting 0")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes its pid, signals and ending here (JSON)")
    parser.add_argument("--save", type=positive_float, default=2.0,
                        help="seconds a worker takes after SIGUSR1 before it exits (a step and a snapshot)")
    return parser.parse_args()


def main():
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)  # first: a signal that comes early waits, pending
    args = parse_args()
    wait_for_signals(args)


# ---- Plumbing shared with lesson 04's script (explained there): argument types ----

def positive_float(text):
    """An argparse type: a finite number > 0. (A check `value <= 0` lets nan through: nan <= 0 is False.)"""
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text}")
    return value


def writable_file(text):
    """An argparse type: a file we can create, checked at start-up, not after the training it would save."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: it is a folder")
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {blocking} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass  # a file can be created there (and is removed again)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {error.strerror or error}") from None
    return path


if __name__ == "__main__":
    sys.exit(main())
