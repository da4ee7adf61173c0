"""How the DDP doctor's cost grows with the size of what it reads: timings printed, never asserted.

    python tools/doctor_bench.py                       # 10k, 40k and 200k lines, 3 runs each
    python tools/doctor_bench.py --lines 10000 40000 --repeat 1 --doctor path/to/another/ddp_doctor.py

Each input is one generated Python file of about the given number of lines, in the shapes that make a
rule's cost grow faster than the file when a rule rescans: one long training function (many epoch loops,
prints of the loss, rank-guarded saves, in one scope), a chain of helper functions each calling the next
(the last one calls a collective), and module-level code. Each run is a fresh `python DOCTOR --format json
FILE` process; the bench prints the doctor's own time for the analysis (its summary, without the
interpreter's start), the CPU seconds of the process, and its peak memory, as the median and min-max over
the runs. A linear doctor takes about the same time per 1,000 lines at every size.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

TOOLS = Path(__file__).resolve().parent

HEADER = '''import os
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group("gloo")
rank = dist.get_rank()
dataset = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=8, sampler=sampler)
model = DDP(nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
'''

EPOCH_BLOCK = '''    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        total = 0.0
        for step, (x, y) in enumerate(loader):
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            if step % 10 == 0:
                print(f"epoch {{epoch}} step {{step}} loss {{loss.item():.4f}} part {i}")
        print(f"epoch {{epoch}} total {{total:.4f}}")
        if rank == 0:
            torch.save(model.module.state_dict(), f"part{i}.tmp")
            os.replace(f"part{i}.tmp", "part{i}.pt")
'''

HELPER = '''def helper_{i}(x):
    """Step {i} of a chain of helpers."""
    y = helper_{j}(x) + {i}
    return y * 2

'''

MODULE_BLOCK = '''values_{i} = [v * {i} for v in range(10)]
if rank == 0:
    print("values", values_{i})
'''


def generate(lines):
    """A file of about `lines` lines: half in one long function, a quarter a chain of helpers, a quarter
    module-level statements."""
    epoch_lines, helper_lines, module_lines = (EPOCH_BLOCK.count("\n"), HELPER.count("\n"),
                                               MODULE_BLOCK.count("\n"))
    n_epoch = max(1, lines // 2 // epoch_lines)
    n_helpers = max(1, lines // 4 // helper_lines)
    n_module = max(1, lines // 4 // module_lines)
    parts = [HEADER, "\n\ndef last_helper(x):\n    dist.all_reduce(x)\n    return x\n\n\n"]
    # helper_0 calls helper_1 ... the last calls last_helper: defined in this order, a rule that adds one
    # function per pass over the file needs as many passes as there are helpers
    parts += [HELPER.format(i=i, j=i + 1 if i + 1 < n_helpers else "last") .replace("helper_last", "last_helper")
              for i in range(n_helpers)]
    parts.append("\ndef train(epochs):\n")
    parts += [EPOCH_BLOCK.format(i=i) for i in range(n_epoch)]
    parts.append("\n\n")
    parts += [MODULE_BLOCK.format(i=i) for i in range(n_module)]
    parts.append("train(2)\nprint(helper_0(torch.zeros(1)))\n")
    return "".join(parts)


def run_once(doctor, path, timeout):
    """(doctor's seconds, CPU seconds, peak MB) of one fresh process, or None past the timeout. The CPU time
    and the peak are the process's own, read by the wait that reaps it (os.wait4): the whole run, its exit
    included, whichever way the doctor ends."""
    with subprocess.Popen([sys.executable, str(doctor), "--format", "json", str(path)], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as process:
        timer = threading.Timer(timeout, process.kill)
        timer.start()
        try:
            output = process.stdout.read()
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)  # (reaped here: Popen must not wait again)
    if process.returncode < 0:  # killed past the timeout
        return None
    summary = json.loads(output)["summary"]
    return summary["seconds"], usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def spread(values, unit=""):
    return f"{statistics.median(values):7.2f}{unit} ({min(values):.2f}-{max(values):.2f})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[10_000, 40_000, 200_000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (median and min-max printed)")
    parser.add_argument("--doctor", type=Path, default=TOOLS / "ddp_doctor.py", help="the doctor to time")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one run may take before it is stopped")
    args = parser.parse_args(argv)
    if args.repeat < 1 or any(n < 100 for n in args.lines):
        parser.error("--repeat must be >= 1 and --lines >= 100")
    print(f"doctor: {args.doctor}")
    print(f"{'lines':>8s} {'doctor s (min-max)':>22s} {'CPU s':>22s} {'peak MB':>22s} {'s per 1k lines':>15s}")
    with tempfile.TemporaryDirectory(prefix="doctor-bench-") as folder:
        for lines in args.lines:
            path = Path(folder) / f"generated_{lines}.py"
            path.write_text(generate(lines))
            actual = path.read_text().count("\n")
            runs = []
            for _ in range(args.repeat):
                run = run_once(args.doctor, path, args.timeout)
                if run is None:
                    print(f"{actual:8d} stopped after {args.timeout:.0f} s")
                    break
                runs.append(run)
            if runs:
                seconds, cpu, mb = zip(*runs)
                print(f"{actual:8d} {spread(seconds, ' s'):>22s} {spread(cpu, ' s'):>22s} {spread(mb, ' MB'):>22s} "
                      f"{statistics.median(seconds) / actual * 1000:15.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
