"""Keep every %%writefile cell and the script it writes identical.

The lessons are the source: a %%writefile cell writes ddp_scripts/NN_x.py when the lesson runs, and
tests/test_hygiene.py fails when the committed file and the cell differ. After editing a script in
an editor instead, copy it back into its cell:

    python tools/sync_scripts.py            # ddp_scripts/*.py -> their %%writefile cells
    python tools/sync_scripts.py --check    # only list the pairs that differ (exit 1 if any)
"""

import argparse
import json
import re
import sys
from pathlib import Path

from clean_notebooks import text_of

REPO = Path(__file__).resolve().parent.parent
WRITEFILE = re.compile(r"%%writefile\s+(\S+)\s*\n")


def writefile_cells(nb):
    """(index, cell, header, target, body) of each %%writefile cell of a notebook (as json.loads reads it):
    header is the `%%writefile ../ddp_scripts/NN_x.py` line, body what the cell writes."""
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        match = WRITEFILE.match(source) if cell["cell_type"] == "code" else None
        if match:
            yield i, cell, source[:match.end()], match.group(1), source[match.end():]


def lines_of(text):
    """A notebook cell's source as nbformat stores it: a list of lines, each but the last with its newline."""
    return text.splitlines(keepends=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a cell differs")
    parser.add_argument("--only", nargs="+", metavar="NN", help="only lessons whose name starts with these")
    args = parser.parse_args(argv)
    differing = []
    for notebook in sorted(p for p in (REPO / "notebooks").glob("*.ipynb") if ".zh-" not in p.name):  # English only
        if args.only and not notebook.name.startswith(tuple(args.only)):
            continue
        nb = json.loads(notebook.read_text())
        changed = False
        for _, cell, header, target, written in writefile_cells(nb):
            script = (notebook.parent / target).resolve()
            body = script.read_text()
            if written in (body, body.removesuffix("\n")):
                continue
            differing.append(f"{notebook.name}: {script.name}")
            cell["source"] = lines_of(header + body.removesuffix("\n"))
            changed = True
        if changed and not args.check:
            notebook.write_text(text_of(nb))
    for line in differing:
        print(("differs: " if args.check else "updated: ") + line)
    return 1 if args.check and differing else 0


if __name__ == "__main__":
    sys.exit(main())
