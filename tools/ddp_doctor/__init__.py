"""The DDP doctor: finds the classic mistakes of a DistributedDataParallel training script by reading it.

    python tools/ddp_doctor.py train.py                # one finding a line, then a summary
    python tools/ddp_doctor.py ddp_scripts notebooks   # folders: every .py file and every notebook in them
    python tools/ddp_doctor.py --explain DDP011        # why a rule exists, its fix, the lesson that teaches it
    python tools/ddp_doctor.py --list                  # every rule, one a line
    python tools/ddp_doctor.py --format json train.py  # for editors and CI
    python tools/ddp_doctor.py --format github src/    # GitHub Actions annotations
    python tools/ddp_doctor.py --select ALL train.py   # advice too (or codes and prefixes: DDP012,DDP01)

It never imports or runs what it checks (pure `ast`, no torch): a script with a hang or a GPU in it
is checked in milliseconds on a laptop. Each finding is printed the way linters print theirs,
`path:line:col: DDP### message`; in a notebook the place is `path.ipynb:cell N:line:col`, where N is
the cell's index in the notebook (0 = the first cell) and line counts from the cell's first line.
A notebook's code cells are read as one program, in order (lines starting with `!` or `%` and
other `%%` cells are skipped); a `%%writefile x.py` cell is read as the file it writes, on its own.

Each rule has a level: error (a hang, a crash, a wrong result or lost work), warning (likely wrong) or
advice (portability, style, speed, a risk: a hard-coded NCCL backend, a non-atomic save, the legacy --local_rank,
`module.` keys in a saved state dict). Errors and warnings are for mistakes that are wrong on every multi-process
launch the program allows; a mistake that shows only on some launches (several nodes, a world size that does not
divide the set, another GPU list) is advice, unless the program itself shows such a launch (DDP001, the global
rank as a device, is advice; DDP026, the same in a program that reads a node's rank or count, is an error).
Errors and warnings are reported by default; advice is chosen with ruff's spelling, --select (codes or
prefixes, comma-separated, or ALL), --extend-select and --ignore, or the same keys (select, extend-select,
ignore) in a [tool.ddp-doctor] table of the pyproject.toml found upward from each checked file. Files are
read as Python reads them (a UTF-8 BOM, a PEP 263 coding line); a file that cannot be read, parsed or
understood as a notebook is one DDP000 finding, always reported, and the run goes on.

Exit code 0 when nothing was reported, 1 when something was (DDP000 included), 2 on bad usage (no such
file, a bad flag or configuration, an unknown code for --explain), 3 when the doctor itself failed on a
file (an internal error: the file is named on stderr, and the other files are still checked).

A lesson may keep a bug on purpose: `# ddp-doctor: ignore[DDP011] why` (several codes: `ignore[DDP005,DDP006]`)
on the finding's line, on the first line of its statement, or alone on the line just above that
statement silences it; the summary counts it as suppressed, and --show-suppressed prints it.

The rules prefer saying nothing to guessing: where a reader of the code cannot be sure (a loader
passed in as an argument, a function called from nowhere in the file), a rule stays silent, and
--explain says where a rule is conservative.

The package: driver.py reads files, folders and notebooks, selects and prints (text, json, github);
program.py is the parsed program model the rules share (scopes, assignments, rank tests, rank guards,
collective-calling functions, DDP-wrapped names); rules/ holds the rules, one module per family. A new
rule is one `rule_*` function in its family's module, with its RULES entry beside it and a docstring line
`Error|Warning|Advice: why`; its case (DDP###_bad.py) and near miss (DDP###_ok*.py) go in
tests/doctor_cases/. tools/doctor_bench.py times it on 10k to 200k generated lines.

Written for notebooks/14_ddp_doctor.ipynb, which teaches it.
"""

from .driver import Finding, Selection, check_file, check_source, explain, files_under, main, message
from .rules import LEVELS, RULE_FUNCTIONS, RULES

__all__ = ["LEVELS", "RULES", "RULE_FUNCTIONS", "Finding", "Selection", "check_file", "check_source", "explain",
           "files_under", "main", "message"]
