"""The driver: reading files, folders and notebooks, running the rules on each program, the command line,
its output formats and exit codes."""

import argparse
import ast
import json
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .program import Module
from .rules import RULE_FUNCTIONS, RULES

DESCRIPTION = "The DDP doctor: finds the classic mistakes of a DistributedDataParallel training script by reading it."

SUPPRESS = re.compile(r"#\s*ddp-doctor:\s*ignore\[([A-Z0-9_,\s]+)\]")
SKIPPED_DIRS = {".git", ".venv", "venv", "build", "node_modules", "__pycache__", ".ipynb_checkpoints"}


@dataclass
class Finding:
    path: str
    line: int
    col: int
    code: str
    message: str
    cell: int | None = None
    suppressed: bool = False

    def place(self):
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.col}"




# ---------------------------------------------------------------------------------------------------
# Reading files: Python, and notebooks' code cells


def suppressed_codes(line):
    match = SUPPRESS.search(line)
    return {c.strip() for c in match.group(1).split(",")} if match else set()


def check_source(source, path, line_map=None, tree=None):
    """Findings of one piece of Python (tree: source already parsed). line_map: line in source -> (cell,
    line in that cell)."""
    def place(line):
        return line_map[min(line, len(line_map)) - 1] if line_map else (None, line)

    try:
        tree = tree or ast.parse(source)
    except SyntaxError as error:
        c, line = place(max(error.lineno or 1, 1))
        return [Finding(path, line, error.offset or 0, "DDP000", message("DDP000", error.msg), c)]
    lines = source.splitlines()
    module = Module(tree)
    findings, seen = [], set()
    for rule in RULE_FUNCTIONS:
        for node, code, detail in rule(module):
            key = (node.lineno, node.col_offset, code)
            if key in seen:
                continue
            seen.add(key)
            stmt = module.statement(node)
            above = lines[stmt.lineno - 2] if stmt.lineno > 1 else ""
            quiet = suppressed_codes(lines[node.lineno - 1]) | suppressed_codes(lines[stmt.lineno - 1]) | (
                suppressed_codes(above) if above.lstrip().startswith("#") else set())
            c, line = place(node.lineno)
            findings.append(Finding(path, line, node.col_offset + 1, code, message(code, detail), c,
                                    suppressed=code in quiet))
    return findings


def message(code, detail):
    return RULES[code][1].format(detail=detail)


def code_cells(nb):
    """(index, Python text) of a notebook's code cells; `!` and `%` lines become `pass`, keeping the lines
    where they are; a `%%writefile x.py` cell is (index, its body, "writefile")."""
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        text = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        lines = text.splitlines()
        if text.startswith("%%"):
            header = lines[0].split()
            if header[0] == "%%writefile" and len(header) > 1 and header[-1].endswith(".py"):
                yield index, lines[1:], "writefile"
            continue
        yield index, [line[:len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("!", "%"))
                      else line for line in lines], "code"


def parsed(source):
    """The tree of source, or None where it does not parse."""
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def notebook_programs(nb):
    """(source, line_map, tree) of each program in a notebook: one for its plain code cells, read in order
    as one program, and one per %%writefile cell of a .py file. line_map[i] = (cell index, line in the
    cell) of program line i + 1. Where the plain cells do not parse together, each cell that does not
    parse alone becomes a program of its own (its DDP000), and the others are read together."""
    plain = []
    for index, lines, kind in code_cells(nb):
        if kind == "writefile":
            yield "\n".join(lines) + "\n", [(index, i + 2) for i in range(len(lines))], None
        else:
            plain.append((index, lines))

    def joined(cells):
        return ("\n".join(line for _, lines in cells for line in lines) + "\n",
                [(index, i + 1) for index, lines in cells for i in range(len(lines))])

    program, line_map = joined(plain)
    tree = parsed(program)
    if tree is None:
        broken = [(index, lines) for index, lines in plain if parsed("\n".join(lines)) is None]
        for cell in broken:
            yield (*joined([cell]), None)
        plain = [cell for cell in plain if cell not in broken]
        program, line_map = joined(plain)
        tree = None
    if plain:
        yield program, line_map, tree


def check_file(path):
    shown = str(path)
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            return [Finding(shown, 1, 0, "DDP000", message("DDP000", f"not a notebook ({error})"))]
        return [f for source, line_map, tree in notebook_programs(nb)
                for f in check_source(source, shown, line_map, tree)]
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        return [Finding(shown, 1, 0, "DDP000", message("DDP000", f"not UTF-8 text ({error.reason})"))]
    return check_source(source, shown)


def files_under(paths):
    for path in paths:
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                parts = child.relative_to(path).parts
                if child.suffix in (".py", ".ipynb") and child.is_file() and \
                        not any(p in SKIPPED_DIRS or p.startswith(".") for p in parts):
                    yield child
        else:
            yield path


# ---------------------------------------------------------------------------------------------------
# The command line


def explain(code):
    name, msg, why, fix, lesson = RULES[code]
    return (f"{code} {name}: {msg.format(detail='...')}\n\nWhy: {why}\n\nFix: {fix}\n\nLesson: {lesson}\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="ddp_doctor.py", description=DESCRIPTION)
    parser.add_argument("paths", nargs="*", type=Path, help="Python files, notebooks, or folders of them")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--explain", metavar="DDP###", help="why a rule exists, its fix and its lesson")
    parser.add_argument("--list", action="store_true", help="every rule: code, name, message")
    parser.add_argument("--show-suppressed", action="store_true",
                        help="also print the findings an ignore comment hides")
    args = parser.parse_args(argv)
    if args.explain is not None:
        args.explain = args.explain.upper()
        if args.explain not in RULES:
            parser.error(f"unknown code {args.explain!r}: the codes are {', '.join(RULES)}")
    elif not args.list and not args.paths:
        parser.error("give a file or folder to check (or --explain DDP###, --list)")
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.explain:
        print(explain(args.explain), end="")
        return 0
    if args.list:
        for code, (name, msg, *_rest) in RULES.items():
            print(f"{code}  {name:32s} {msg.format(detail='...')}")
        return 0
    started = time.perf_counter()
    files = list(files_under(args.paths))
    findings = [f for path in files for f in sorted(check_file(path), key=lambda f: (f.cell or 0, f.line, f.col))]
    seconds = time.perf_counter() - started
    active = [f for f in findings if not f.suppressed]
    summary = dict(files=len(files), findings=len(active), suppressed=len(findings) - len(active),
                   seconds=round(seconds, 3))
    if args.format == "json":
        print(json.dumps(dict(findings=[asdict(f) for f in findings], summary=summary), indent=1))
    else:
        for f in findings:
            if not f.suppressed or args.show_suppressed:
                print(f"{f.place()}: {f.code} {f.message}" + (" (suppressed)" if f.suppressed else ""))
        what = f"{len(active)} finding(s)" if active else "no findings"
        print(f"ddp-doctor: {what} in {len(files)} file(s), {summary['suppressed']} suppressed "
              f"({seconds:.2f} s)")
    return 1 if active else 0


if __name__ == "__main__":
    sys.exit(main())
