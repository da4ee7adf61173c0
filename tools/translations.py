"""The Chinese editions: one gettext PO catalog per lesson (zh-Hant by hand), zh-Hans derived by OpenCC.

    python tools/translations.py check [NN ...]        # every problem, one line each; exit 1 if any
    python tools/translations.py update [NN ...]       # merge the English into the catalogs, msgmerge-style
    python tools/translations.py start NN [NN ...]     # create the catalog of a lesson not translated yet
    python tools/translations.py notebooks [--edition zh-Hant|zh-Hans]  # write notebooks/NN_slug.zh-*.ipynb

One message per markdown cell: msgctxt is the cell id, msgid its English source, msgstr the zh-Hant
text. `update` keeps a translation whose English is unchanged, marks one whose English changed as
fuzzy (the old translation kept as the starting point, the old English as its previous msgid), adds
new cells untranslated, and makes removed cells obsolete. Only lessons that have a catalog are
updated: a lesson joins the Chinese editions with `start`.

简体 (zh-Hans) is never translated: it is the zh-Hant text converted by OpenCC's `t2s` configuration,
with code spans, fenced code, HTML tags, link targets, URLs and quotations of the source post left as
they are. A quotation of the post (which is written in traditional characters) is marked
`<span lang="zh-Hant">…</span>` in the zh-Hant text and stays in the post's own script in both editions.

`check` reports, for every lesson that has a catalog: cells untranslated, fuzzy or stale (the catalog's
English is not the lesson's English), code spans, links, fenced blocks or HTML tags of the English lost
or changed in the translation, term-table violations (translations/terms.tsv), links to anchors that
the Chinese page does not have, the handout index catalog (translations/zh-Hant/index.po), and the
words OpenCC's phrase tables convert otherwise than character by character, unless reviewed in
translations/t2s_reviewed.tsv.

Term rule: a translated cell whose English prose uses a term of the table (whole words, any case)
must contain the term's Chinese. Code spans, fenced code, link targets, URLs and HTML tags of the
English are not prose and are not searched, and an all-capitals spelling of a term written with an
underscore (`WORLD_SIZE`, `LOCAL_RANK`) is an environment variable's name, not the term.
"""

import argparse
import difflib
import functools
import json
import re
import sys
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
TRANSLATIONS = ROOT / "translations"
CATALOGS = TRANSLATIONS / "zh-Hant"
TERMS = TRANSLATIONS / "terms.tsv"
T2S_REVIEWED = TRANSLATIONS / "t2s_reviewed.tsv"
INDEX_CATALOG = CATALOGS / "index.po"
EDITIONS = ("zh-Hant", "zh-Hans")
LESSON_FILE = re.compile(r"^(\d\d)_[a-z0-9_]+\.ipynb$")  # an English lesson; NN_slug.zh-Hant.ipynb is not one
HEADER = {
    "Project-Id-Version": "ddp-series",
    "Language": "zh_Hant",
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
}

# The parts of a markdown text that are not prose: never converted to simplified, never searched for terms.
FENCED = r"^(?P<fence>```|~~~)[^\n]*\n.*?^(?P=fence)[ \t]*$"
POST_QUOTE = r'<span lang="zh-Hant">.*?</span>'
CODE_SPAN = r"(?P<ticks>`+).+?(?P=ticks)"
HTML_TAG = r"</?[A-Za-z][^>\n]*>"
LINK_TARGET = r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)"
URL = r"https?://[^\s)>\]]+"
NOT_PROSE = re.compile("|".join(f"(?:{p})" for p in (FENCED, POST_QUOTE, CODE_SPAN, HTML_TAG, LINK_TARGET, URL)),
                       re.S | re.M)


def is_lesson(path):
    return LESSON_FILE.match(path.name) is not None


def lesson_notebooks():
    """The English lessons, in order: notebooks/NN_name.ipynb (not the generated NN_name.zh-*.ipynb)."""
    return sorted(path for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if is_lesson(path))


def markdown_cells(notebook):
    """(cell id, source) of each markdown cell of a notebook, in order."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [(cell["id"], "".join(cell["source"])) for cell in cells if cell["cell_type"] == "markdown"]


def catalog_path(notebook):
    return CATALOGS / f"{Path(notebook).stem}.po"


def translated_lessons():
    """The English lessons that have a catalog: the lessons of the Chinese editions."""
    return [nb for nb in lesson_notebooks() if catalog_path(nb).exists()]


def load(path):
    return polib.pofile(str(path), wrapwidth=0)


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


# ---------------------------------------------------------------------------------------------------
# zh-Hans: OpenCC t2s over the prose only
# ---------------------------------------------------------------------------------------------------

@functools.cache
def _t2s():
    import opencc

    return opencc.OpenCC("t2s")


@functools.cache
def _char_t2s(char):
    return _t2s().convert(char)


def prose_and_rest(text):
    """[(is_prose, piece), …] covering text: the prose between the NOT_PROSE parts, and those parts."""
    pieces, at = [], 0
    for match in NOT_PROSE.finditer(text):
        pieces.append((True, text[at:match.start()]))
        pieces.append((False, match.group(0)))
        at = match.end()
    pieces.append((True, text[at:]))
    return [(prose, piece) for prose, piece in pieces if piece]


def to_hans(text):
    """The zh-Hans text of a zh-Hant text: t2s on the prose; code, tags, links and post quotes kept."""
    return "".join(_t2s().convert(piece) if prose else piece for prose, piece in prose_and_rest(text))


def phrase_conversions(text):
    """[(traditional phrase, what t2s makes of it, character-by-character)] for each place where t2s's
    phrase tables give something else than converting each character alone. The phrase is the shortest
    window around the difference that t2s, given that window alone, still converts differently."""
    found = []
    for prose, piece in prose_and_rest(text):
        if not prose:
            continue
        whole = _t2s().convert(piece)
        by_char = "".join(_char_t2s(c) for c in piece)
        if whole == by_char:
            continue
        if len(whole) != len(piece):  # t2s changed the length: report the whole differing stretch
            found.append((piece, whole, by_char))
            continue
        for op, i1, i2, _, _ in difflib.SequenceMatcher(None, whole, by_char, autojunk=False).get_opcodes():
            if op == "equal":
                continue
            found.append(_shortest_window(piece, i1, i2))
    return found


def _shortest_window(piece, i1, i2):
    for size in range(i2 - i1, i2 - i1 + 8):
        for start in range(max(0, i2 - size), min(i1, len(piece) - size) + 1):
            window = piece[start:start + size]
            whole, by_char = _t2s().convert(window), "".join(_char_t2s(c) for c in window)
            if whole != by_char:
                return window, whole, by_char
    window = piece[max(0, i1 - 3):i2 + 3]
    return window, _t2s().convert(window), "".join(_char_t2s(c) for c in window)


def reviewed_t2s():
    """{(traditional, t2s result)}: phrase conversions reviewed and found right (translations/t2s_reviewed.tsv)."""
    reviewed = set()
    if T2S_REVIEWED.exists():
        for line in T2S_REVIEWED.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                fields = line.split("\t")
                reviewed.add((fields[0], fields[1]))
    return reviewed


# ---------------------------------------------------------------------------------------------------
# the Chinese notebooks: the English lesson with its markdown translated
# ---------------------------------------------------------------------------------------------------

def translations_of(notebook, edition="zh-Hant"):
    """{cell id: text} of the lesson's translated cells (neither fuzzy nor stale) in an edition."""
    english = dict(markdown_cells(notebook))
    out = {}
    for entry in load(catalog_path(notebook)):
        if (not entry.obsolete and entry.msgstr and "fuzzy" not in entry.flags
                and english.get(entry.msgctxt) == entry.msgid):
            out[entry.msgctxt] = entry.msgstr if edition == "zh-Hant" else to_hans(entry.msgstr)
    return out


def edition_name(stem, edition):
    """'04_ddp_train' -> '04_ddp_train.zh-Hant.ipynb'."""
    return f"{stem}.{edition}.ipynb"


def heading_anchor(line):
    """The id nbconvert (and JupyterLab) give a markdown heading: its text, spaces as hyphens."""
    text = line.lstrip("#").strip()
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"`|\*\*?", "", text).strip()
    return text.replace(" ", "-")


def headings(text):
    """The heading lines of a markdown text (outside fenced code)."""
    text = re.sub(FENCED, "", text, flags=re.S | re.M)
    return [line for line in text.splitlines() if re.match(r"#{1,6} ", line)]


@functools.cache
def linked_anchors():
    """The anchors (#…) that the English lessons link to."""
    return frozenset(anchor for notebook in lesson_notebooks() for _, text in markdown_cells(notebook)
                     for anchor in re.findall(r"\]\([^)#\s]*#([^)\s]+)\)", text))


def keep_english_anchors(english, translated):
    """Give each translated heading that a lesson links to the id of its English heading too
    (`<a id="…"></a>`), so a link to `#Glossary-術語表` resolves in every edition. Headings are paired in
    order, when both have as many."""
    ours, theirs = headings(english), headings(translated)
    if len(ours) != len(theirs):
        return translated
    lines = translated.split("\n")
    for en, zh in zip(ours, theirs):
        anchor = heading_anchor(en)
        if anchor in linked_anchors() and anchor != heading_anchor(zh) and f'id="{anchor}"' not in zh:
            index = lines.index(zh)
            lines[index] = f'{zh} <a id="{anchor}"></a>'
    return "\n".join(lines)


def chinese_links(text, edition, translated_stems):
    """Links to a lesson of the Chinese editions go to its Chinese notebook (same folder)."""
    def swap(match):
        stem = match.group(2)
        return f"{match.group(1)}{edition_name(stem, edition) if stem in translated_stems else stem + '.ipynb'}"
    return re.sub(r"(\]\(|href=\")(\d\d_[a-z0-9_]+)\.ipynb", swap, text)


def edition_notebook(notebook, edition, nb=None):
    """The notebook of one edition (an nbformat node): `nb` (default: the English lesson, e.g. an executed
    one) with every markdown cell replaced by its translation. Raises ValueError naming the first cell
    without a translation."""
    import nbformat

    if edition not in EDITIONS:
        raise ValueError(f"no edition {edition!r}: {', '.join(EDITIONS)}")
    nb = nbformat.read(notebook, as_version=4) if nb is None else nb
    english = dict(markdown_cells(notebook))
    texts = translations_of(notebook, edition)
    stems = {p.stem for p in translated_lessons()}
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        if cell.get("id") not in texts:
            raise ValueError(f"{notebook.stem} cell {cell.get('id')}: no translation: run "
                             f"python tools/translations.py check {notebook.name[:2]}")
        text = keep_english_anchors(english.get(cell.id, cell.source), texts[cell.id])
        cell.source = chinese_links(text, edition, stems)
    nb.metadata["ddp_series"] = {"edition": edition, "generated_from": notebook.name,
                                 "note": "generated by tools/translations.py notebooks: edit the English "
                                         "lesson and translations/zh-Hant/, not this file"}
    return nb


def write_notebooks(editions=EDITIONS, folder=NOTEBOOKS, skipped=None):
    """notebooks/NN_slug.zh-Hant.ipynb (and zh-Hans) for every lesson with a complete catalog; returns their
    paths. A lesson whose catalog misses a cell is left out, with the reason appended to `skipped`."""
    import nbformat

    written = []
    for notebook in translated_lessons():
        for edition in editions:
            target = folder / edition_name(notebook.stem, edition)
            try:
                nb = edition_notebook(notebook, edition)
            except ValueError as error:
                if skipped is None:
                    raise
                skipped.append(str(error))
                break
            text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
            nbformat.validate(nb)
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                target.write_text(text, encoding="utf-8")
            written.append(target)
    return written


# ---------------------------------------------------------------------------------------------------
# the handout index's own words (the lessons' titles and summaries come from their first cells)
# ---------------------------------------------------------------------------------------------------

INDEX_STRINGS = {
    "page-title": "DDP notebook series — handouts",
    "heading": "From one device to DistributedDataParallel",
    "intro": "Handouts of the DDP notebook series, executed end to end. Each lesson's numbers were measured "
             "in the run shown here, on the backend and devices listed.",
    "column-lesson": "Lesson",
    "column-run-time": "Run time",
    "column-torch": "torch",
    "column-backend": "Backend",
    "column-devices": "Devices",
    "column-parameters": "Parameters",
    "column-executed": "Executed",
    "launches": "launches",
    "failed": "failed",
    "defaults": "defaults",
    "language-bar": "This lesson in:",
    "index-language-bar": "These handouts in:",
    "index-link": "All lessons",
}
LANGUAGE_NAMES = {"en": "English", "zh-Hant": "繁體中文", "zh-Hans": "简体中文"}


def index_strings(edition):
    """{key: text} of the handout index in an edition ('en' gives the English)."""
    if edition == "en":
        return dict(INDEX_STRINGS)
    entries = {e.msgctxt: e for e in load(INDEX_CATALOG) if not e.obsolete} if INDEX_CATALOG.exists() else {}
    out = {}
    for key, english in INDEX_STRINGS.items():
        entry = entries.get(key)
        ok = entry is not None and entry.msgstr and "fuzzy" not in entry.flags and entry.msgid == english
        text = entry.msgstr if ok else english
        out[key] = text if edition == "zh-Hant" else to_hans(text)
    return out


def merge_index(catalog):
    merged = polib.POFile(wrapwidth=0)
    merged.metadata = dict(HEADER)
    old = {entry.msgctxt: entry for entry in catalog if not entry.obsolete}
    for key, english in INDEX_STRINGS.items():
        entry = polib.POEntry(msgctxt=key, msgid=english, msgstr="")
        before = old.pop(key, None)
        if before is not None:
            entry.msgstr, entry.flags, entry.previous_msgid = before.msgstr, list(before.flags), before.previous_msgid
            if before.msgid != english and before.msgstr and "fuzzy" not in entry.flags:
                entry.flags.append("fuzzy")
                entry.previous_msgid = before.msgid
        merged.append(entry)
    for gone in old.values():
        gone.obsolete = True
        merged.append(gone)
    return merged


# ---------------------------------------------------------------------------------------------------
# check
# ---------------------------------------------------------------------------------------------------

def terms():
    """[(english term, zh-Hant term)] of translations/terms.tsv."""
    rows = []
    for line in TERMS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            english, chinese = line.split("\t")[:2]
            rows.append((english.strip(), chinese.strip()))
    return rows


def prose_of(text):
    """The English prose of a markdown text: code, tags, link targets and URLs blanked out."""
    return "".join(piece if prose else " " for prose, piece in prose_and_rest(text))


def uses_term(english_prose, term):
    pattern = re.compile(rf"(?<![\w-]){re.escape(term)}(?![\w-])", re.I)
    for match in pattern.finditer(english_prose):
        if "_" in term and match.group(0).isupper():  # WORLD_SIZE, LOCAL_RANK: environment variables
            continue
        return True
    return False


def parts(text):
    """What a translation must carry over unchanged: code spans, link targets, fenced blocks, HTML tags."""
    fenced = [m.group(0) for m in re.finditer(FENCED, text, re.S | re.M)]
    rest = re.sub(FENCED, "", text, flags=re.S | re.M)
    rest_no_code = re.sub(CODE_SPAN, "", rest, flags=re.S)
    return {
        # a line break inside a code span renders as a space: compare them so
        "code span": {re.sub(r"\s+", " ", m.group(0)) for m in re.finditer(CODE_SPAN, rest, re.S)},
        "link": {m.group(0)[2:-1] for m in re.finditer(LINK_TARGET, rest_no_code)},
        "fenced block": fenced,
        "HTML tag": {m.group(0) for m in re.finditer(HTML_TAG, rest_no_code)},
    }


def anchors_in(text):
    """The ids a markdown text gives its page: its headings' and explicit id="…" attributes."""
    return {heading_anchor(h) for h in headings(text)} | set(re.findall(r'id="([^"]+)"', text))


def check(numbers=()):
    """Every problem of the Chinese editions, one line each (an empty list: all is well)."""
    problems = []
    table = terms()
    reviewed = reviewed_t2s()
    lessons = [nb for nb in lessons_named(numbers) if catalog_path(nb).exists()]
    all_anchors = {}
    for notebook in translated_lessons():
        english = dict(markdown_cells(notebook))
        texts = translations_of(notebook)
        all_anchors[notebook.stem] = set().union(*(anchors_in(keep_english_anchors(english[c], t))
                                                   for c, t in texts.items()), set())
    for notebook in lessons:
        nn, stem = notebook.name[:2], notebook.stem
        po = catalog_path(notebook).relative_to(ROOT)
        fix = f"run python tools/translations.py update {nn}, then translate the cell in {po}"
        entries = {e.msgctxt: e for e in load(catalog_path(notebook)) if not e.obsolete}
        for cell_id, source in markdown_cells(notebook):
            where = f"{stem} cell {cell_id}"
            entry = entries.get(cell_id)
            if entry is None or not entry.msgstr:
                problems.append(f"{where}: untranslated: {fix}")
                continue
            if "fuzzy" in entry.flags:
                problems.append(f"{where}: fuzzy (its English changed): {fix}, and delete its fuzzy flag")
                continue
            if entry.msgid != source:
                problems.append(f"{where}: stale (the English changed since it was translated): {fix}")
                continue
            zh = entry.msgstr
            fix_text = f"correct the cell's msgstr in {po}"
            theirs = parts(zh)
            for kind, ours in parts(source).items():
                if kind == "fenced block":
                    if ours != theirs[kind]:
                        problems.append(f"{where}: fenced block lost or changed in the translation: {fix_text}")
                    continue
                for lost in sorted(set(ours) - set(theirs[kind])):
                    problems.append(f"{where}: {kind} {lost!r} lost or changed in the translation: {fix_text}")
            prose = prose_of(source)
            for term, chinese in table:
                if uses_term(prose, term) and chinese not in zh:
                    problems.append(f"{where}: the English says {term!r}, the translation lacks its term "
                                    f"{chinese!r} (translations/terms.tsv): {fix_text}")
            for target in re.findall(r"\]\((\d\d_[a-z0-9_]+\.ipynb)?#([^)\s]+)\)", zh):
                page = target[0][:-len(".ipynb")] if target[0] else stem
                if page in all_anchors and target[1] not in all_anchors[page]:
                    problems.append(f"{where}: link to #{target[1]}, which the Chinese {page} has not: {fix_text}")
            for trad, whole, by_char in phrase_conversions(zh):
                if (trad, whole) not in reviewed:
                    problems.append(f"{where}: zh-Hans: OpenCC t2s turns {trad!r} into {whole!r}, not {by_char!r}: "
                                    f"reword the cell's msgstr in {po}, "
                                    f"or add the line '{trad}\t{whole}\t<why it is right>' "
                                    f"to {T2S_REVIEWED.relative_to(ROOT)}")
    if not numbers:
        problems += check_index()
    return problems


def check_index():
    fix = f"run python tools/translations.py update, then translate it in {INDEX_CATALOG.relative_to(ROOT)}"
    entries = {e.msgctxt: e for e in load(INDEX_CATALOG) if not e.obsolete} if INDEX_CATALOG.exists() else {}
    problems = []
    for key, english in INDEX_STRINGS.items():
        entry = entries.get(key)
        if entry is None or not entry.msgstr:
            problems.append(f"index {key}: untranslated: {fix}")
        elif "fuzzy" in entry.flags or entry.msgid != english:
            problems.append(f"index {key}: fuzzy or stale: {fix}, and delete its fuzzy flag")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["check", "update", "start", "notebooks"])
    parser.add_argument("lessons", nargs="*", help="lesson numbers (NN); default: every lesson with a catalog")
    parser.add_argument("--edition", choices=EDITIONS, action="append",
                        help="notebooks: only this edition (default: both)")
    args = parser.parse_args(argv)
    if args.command == "start" and not args.lessons:
        parser.error("start needs the lesson numbers to create catalogs for")
    if args.command == "check":
        problems = check(args.lessons)
        for line in problems:
            print(line)
        lessons = [nb.name[:2] for nb in lessons_named(args.lessons) if catalog_path(nb).exists()]
        print(f"translations: {len(problems)} problem(s) in the Chinese editions of lessons {' '.join(lessons)}",
              file=sys.stderr)
        return 1 if problems else 0
    if args.command == "notebooks":  # every lesson whose catalog is complete; the others are named
        skipped = []
        written = write_notebooks(tuple(args.edition or EDITIONS), skipped=skipped)
        for path in written:
            print(path.relative_to(ROOT))
        for reason in skipped:
            print(f"translations.py: not written, left in English: {reason}", file=sys.stderr)
        return 0 if written else 1
    for notebook in lessons_named(args.lessons):
        path = catalog_path(notebook)
        if args.command == "update" and not path.exists():
            continue
        catalog = load(path) if path.exists() else polib.POFile(wrapwidth=0)
        merged = merge(notebook, catalog)
        path.parent.mkdir(parents=True, exist_ok=True)
        merged.save(str(path))
        untranslated = sum(1 for e in merged if not e.obsolete and (not e.msgstr or "fuzzy" in e.flags))
        print(f"{path.relative_to(ROOT)}: {len([e for e in merged if not e.obsolete])} cells, "
              f"{untranslated} to translate")
    if args.command == "update" and not args.lessons:
        merged = merge_index(load(INDEX_CATALOG) if INDEX_CATALOG.exists() else polib.POFile(wrapwidth=0))
        merged.save(str(INDEX_CATALOG))
        print(f"{INDEX_CATALOG.relative_to(ROOT)}: {len(INDEX_STRINGS)} strings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
