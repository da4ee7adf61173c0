"""Remove what running a lesson in JupyterLab saves into it: outputs, execution counts, widget state.

Lessons are committed without outputs (the handouts carry them), and tests/test_hygiene.py fails on a
notebook saved with them. This fixes it rather than only detecting it:

    python tools/clean_notebooks.py             # clean notebooks/*.ipynb in place (make clean-notebooks)
    python tools/clean_notebooks.py --check     # change nothing; list what would change (exit 1 if any)
    python tools/clean_notebooks.py PATH ...    # only these notebooks

Kept: every cell's source, id and tags, and the notebook's kernelspec and language_info.
"""

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KEPT_NOTEBOOK_METADATA = ("kernelspec", "language_info")
KEPT_CELL_METADATA = ("tags",)


def cleaned(nb: dict) -> dict:
    """The notebook as the series commits it."""
    nb = json.loads(json.dumps(nb))  # a copy
    nb["metadata"] = {k: v for k, v in nb["metadata"].items() if k in KEPT_NOTEBOOK_METADATA}
    for cell in nb["cells"]:
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k in KEPT_CELL_METADATA}
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return nb


def text_of(nb: dict) -> str:
    """The series' notebook format: one-space indent, UTF-8 kept as is, a final newline."""
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: notebooks/*.ipynb)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a notebook is not clean")
    args = parser.parse_args(argv)
    paths = args.paths or sorted(p for p in (REPO / "notebooks").glob("*.ipynb")
                                  if ".zh-" not in p.name)  # the generated Chinese editions are not committed
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    dirty = []
    for path in paths:
        text = path.read_text()
        clean = text_of(cleaned(json.loads(text)))
        if clean != text:
            dirty.append(path)
            if not args.check:
                path.write_text(clean)
    for path in dirty:
        print(("not clean: " if args.check else "cleaned: ") + str(path))
    return 1 if args.check and dirty else 0


if __name__ == "__main__":
    sys.exit(main())
