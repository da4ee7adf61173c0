"""The Chinese editions' translation catalogs: one gettext PO file per lesson, zh-Hant by hand.

    python tools/translations.py update [NN ...]   # merge the English into the catalogs, msgmerge-style
    python tools/translations.py start NN [NN ...] # create the catalog of a lesson not translated yet

One message per markdown cell: msgctxt is the cell id, msgid its English source, msgstr the zh-Hant
text. `update` keeps a translation whose English is unchanged, marks one whose English changed as
fuzzy (the old translation kept as the starting point, the old English as its previous msgid), adds
new cells untranslated, and makes removed cells obsolete. Only lessons that have a catalog are
updated: a lesson joins the Chinese editions with `start`.
"""

import argparse
import json
import sys
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CATALOGS = ROOT / "translations" / "zh-Hant"
HEADER = {
    "Project-Id-Version": "ddp-series",
    "Language": "zh_Hant",
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
}


def lesson_notebooks():
    """The English lessons, in order: notebooks/NN_name.ipynb."""
    return sorted(path for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if path.stem.count(".") == 0)


def markdown_cells(notebook):
    """(cell id, source) of each markdown cell of a notebook, in order."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [(cell["id"], "".join(cell["source"])) for cell in cells if cell["cell_type"] == "markdown"]


def catalog_path(notebook):
    return CATALOGS / f"{notebook.stem}.po"


def merge(notebook, catalog):
    """Bring `catalog` up to date with the English of `notebook`, the way msgmerge does."""
    old = {entry.msgctxt: entry for entry in catalog if not entry.obsolete}
    merged = polib.POFile(wrapwidth=0)
    merged.metadata = dict(HEADER)
    for cell_id, source in markdown_cells(notebook):
        entry = polib.POEntry(msgctxt=cell_id, msgid=source, msgstr="")
        before = old.pop(cell_id, None)
        if before is not None:
            entry.msgstr = before.msgstr
            entry.flags = list(before.flags)
            entry.previous_msgid = before.previous_msgid
            if before.msgid != source and before.msgstr:
                if "fuzzy" not in entry.flags:
                    entry.flags.append("fuzzy")
                    entry.previous_msgid = before.msgid
        merged.append(entry)
    for gone in old.values():
        gone.obsolete = True
        merged.append(gone)
    for entry in catalog:
        if entry.obsolete and entry.msgctxt not in {e.msgctxt for e in merged}:
            merged.append(entry)
    return merged


def lessons_named(numbers):
    notebooks = lesson_notebooks()
    chosen = [nb for nb in notebooks if not numbers or nb.name[:2] in numbers]
    unknown = set(numbers) - {nb.name[:2] for nb in notebooks}
    if unknown:
        sys.exit(f"translations.py: no lesson numbered {', '.join(sorted(unknown))}")
    return chosen


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["update", "start"])
    parser.add_argument("lessons", nargs="*", help="lesson numbers (NN); default: every lesson with a catalog")
    args = parser.parse_args(argv)
    if args.command == "start" and not args.lessons:
        parser.error("start needs the lesson numbers to create catalogs for")
    for notebook in lessons_named(args.lessons):
        path = catalog_path(notebook)
        if args.command == "update" and not path.exists():
            continue
        catalog = polib.pofile(str(path), wrapwidth=0) if path.exists() else polib.POFile(wrapwidth=0)
        merged = merge(notebook, catalog)
        path.parent.mkdir(parents=True, exist_ok=True)
        merged.save(str(path))
        untranslated = sum(1 for e in merged if not e.obsolete and (not e.msgstr or "fuzzy" in e.flags))
        print(f"{path.relative_to(ROOT)}: {len([e for e in merged if not e.obsolete])} cells, "
              f"{untranslated} to translate")


if __name__ == "__main__":
    main()
