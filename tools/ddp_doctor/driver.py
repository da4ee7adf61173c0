"""The driver: reading files, folders and notebooks (as Python reads them, never with a traceback), running the
rules on each program, which rules are selected, the command line, its output formats and exit codes."""

import argparse
import ast
import contextlib
import gc
import io
import json
import keyword
import os
import re
import sys
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path

from .program import Module
from .rules import DEFAULT_LEVELS, LEVEL_NAMES, LEVELS, RULE_FUNCTIONS, RULES

DESCRIPTION = "The DDP doctor: finds the classic mistakes of a DistributedDataParallel training script by reading it."

SUPPRESS = re.compile(r"#\s*ddp-doctor:\s*ignore\[([A-Z0-9_,\s]+)\]")
SKIPPED_DIRS = {".git", ".venv", "venv", "build", "node_modules", "__pycache__", ".ipynb_checkpoints"}

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class Leaving:
    """How a command-line run ends (main(exiting=True), then hard_exit): nothing is freed once the report is out."""
    quickly = False  # set by main(exiting=True), the command line's run
    kept = None  # the last program model (Module) read, left for the process's exit to drop


@dataclass
class Finding:
    path: str
    line: int
    col: int
    code: str
    message: str
    cell: int | None = None
    suppressed: bool = False
    severity: str = ""

    def __post_init__(self):
        self.severity = self.severity or LEVELS.get(self.code, "error")

    def place(self):
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.col}"


class BadInput(Exception):
    """A file the doctor cannot read as Python or as a notebook: one DDP000 finding, and the run goes on."""


# ---------------------------------------------------------------------------------------------------
# Checking one program


def suppressed_codes(line):
    match = SUPPRESS.search(line)
    return {c.strip() for c in match.group(1).split(",")} if match else set()


def parse(source):
    """The tree of source, as Python's own compiler reads it; BadInput (with Python's reason) where it cannot."""
    try:
        return ast.parse(source)
    except SyntaxError as error:
        raise BadInput(error.msg, max(error.lineno or 1, 1), error.offset or 0) from None
    except (RecursionError, MemoryError):  # CPython cannot compile it either
        raise BadInput("nested too deeply for Python's parser", 1, 0) from None
    except ValueError as error:  # null bytes (a SyntaxError from Python 3.12 on)
        raise BadInput(str(error), 1, 0) from None


def check_source(source, path, line_map=None, tree=None, errors=None, folder=None):
    """Findings of one piece of Python (tree: source already parsed). line_map: line in source -> (cell,
    line in that cell). errors: a list that collects the rules' own failures ("rule: exception"), so that
    the other rules still run; without it, a rule's exception propagates."""
    def place(line):
        return line_map[min(line, len(line_map)) - 1] if line_map else (None, line)

    if tree is None:
        try:
            tree = parse(source)
        except BadInput as bad:
            detail, line, col = bad.args
            c, line = place(line)
            return [Finding(path, line, col, "DDP000", message("DDP000", detail), c)]
    can_quiet = "ddp-doctor" in source  # an ignore comment names the doctor (most files have none)
    lines = source.splitlines() if can_quiet else []  # read only where a comment may silence a finding
    module = Module(tree, folder)
    module.source = source  # (the text the tree was read from: a rule may search it before the nodes)
    if Leaving.quickly:
        Leaving.kept = module
    findings, seen = [], set()
    for rule in RULE_FUNCTIONS:
        try:
            found = list(rule(module))
        except Exception as error:  # a bug in the doctor: say so, and go on with the other rules
            if errors is None:
                raise
            errors.append(f"{rule.__name__}: {type(error).__name__}: {error}")
            continue
        uncalled = module.uncalled_lines() if found else b""  # the lines of functions nothing calls by name
        for node, code, detail in found:
            key = (node.lineno, node.col_offset, code)
            if key in seen:
                continue
            seen.add(key)
            if node.lineno < len(uncalled) and uncalled[node.lineno] and module.in_unreferred_function(node):
                continue  # code that nothing in the program runs: no rule reports it
            quiet = quiet_codes(lines, node.lineno, module.statement(node).lineno) if can_quiet else set()
            c, line = place(node.lineno)
            findings.append(Finding(path, line, node.col_offset + 1, code, message(code, detail), c,
                                    suppressed=code in quiet))
    return findings


def quiet_codes(lines, line, statement_line):
    """The codes an ignore comment silences for a finding: on its line, on its statement's first line, or on
    a comment line just above that statement."""
    above = lines[statement_line - 2] if 1 < statement_line <= len(lines) + 1 else ""
    return suppressed_codes(line_at(lines, line)) | suppressed_codes(line_at(lines, statement_line)) | (
        suppressed_codes(above) if above.lstrip().startswith("#") else set())


def line_at(lines, number):
    return lines[number - 1] if 0 < number <= len(lines) else ""


def message(code, detail):
    return RULES[code][1].format(detail=detail)


# ---------------------------------------------------------------------------------------------------
# Reading files: Python as Python reads it, and notebooks' code cells


def read_python(path):
    """A Python file's text, decoded as CPython decodes it: a UTF-8 BOM, a PEP 263 coding line, else UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise BadInput(f"cannot read it ({error.strerror or error})", 1, 0) from None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)  # 'utf-8-sig' where there is a BOM
        return data.decode(encoding)
    except SyntaxError as error:  # an unknown encoding, or a BOM with another coding line
        raise BadInput(str(error), 1, 0) from None
    except UnicodeDecodeError as error:
        raise BadInput(f"not {error.encoding} text ({error.reason})", 1, 0) from None


def read_notebook(path):
    """A notebook's JSON, checked for the shape the doctor reads: a dict whose cells are a list of dicts, each
    code cell with a source that is text or a list of texts."""
    try:
        nb = json.loads(path.read_bytes().decode("utf-8-sig"))
    except OSError as error:
        raise BadInput(f"cannot read it ({error.strerror or error})", 1, 0) from None
    except (ValueError, RecursionError) as error:  # bad JSON, bad UTF-8, JSON nested too deeply
        raise BadInput(f"not a notebook ({type(error).__name__}: {str(error)[:200]})", 1, 0) from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        what = "a JSON object" if not isinstance(nb, dict) else "a list of cells under 'cells'"
        raise BadInput(f"not a notebook (it has no {what})", 1, 0)
    for index, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict):
            raise BadInput(f"not a notebook (cell {index} is not a JSON object)", 1, 0)
        source = cell.get("source")
        if cell.get("cell_type") == "code" and not (
                isinstance(source, str) or (isinstance(source, list) and all(isinstance(s, str) for s in source))):
            raise BadInput(f"not a notebook (code cell {index} has no source text)", 1, 0)
    return nb


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
        return parse(source)
    except BadInput:
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


@contextlib.contextmanager
def gc_paused():
    """Python's cycle collector off while one file is read: a parse makes a million objects and no cycles,
    and the collector would scan them again and again (a 200k-line file parses 3 to 4 times faster)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def check_file(path, errors=None, folder=None):
    """Every finding of one file (a .ipynb is read as a notebook, anything else as Python). A file that cannot
    be read is one DDP000 finding. errors: see check_source."""
    shown = str(path)
    with gc_paused():
        Leaving.kept = None  # the file before's model, freed before this one is read: one in memory at a time
        try:
            if path.suffix == ".ipynb":
                nb = read_notebook(path)
                return [f for source, line_map, tree in notebook_programs(nb)
                        for f in check_source(source, shown, line_map, tree, errors, folder)]
            return check_source(read_python(path), shown, errors=errors, folder=folder)
        except BadInput as bad:
            detail, line, col = bad.args
            return [Finding(shown, line, col, "DDP000", message("DDP000", detail))]


CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
RANK_READ = r"(?:get_(?:node_)?(?:local_)?rank\(\)|[\"'](?:RANK|LOCAL_RANK|SLURM_PROCID|SLURM_LOCALID)[\"'])"
RANK_ATTRIBUTE = re.compile(r"\.(\w+)[ \t]*=[^=\n][^\n]*" + RANK_READ)
LOCAL_RENDEZVOUS = re.compile(r"\[[ \t]*[\"']MASTER_ADDR[\"'][ \t]*\][ \t]*=[ \t]*[\"'](?:localhost|127\.0\.0\.1)[\"']|"
                              r"init_method[ \t]*=[ \t]*f?[\"']tcp://(?:localhost|127\.0\.0\.1)[:\"']")
BUILT = re.compile(r"(?<!class )(?<!def )\b([A-Za-z_]\w*)[ \t]*\(")
COMMENT = re.compile(r"#[^\n]*")
FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
IMPORTED_NAME = re.compile(r"[A-Za-z_]\w*")  # every word: `a, b as c` gives a, b, as, c (more is harmless)
TORCH_SAVE = re.compile(r"\btorch\.save[ \t]*\(")
SAMPLER_SET_EPOCH = re.compile(r"\.[ \t]*(?:batch_)?sampler[ \t]*\.[ \t]*set_epoch[ \t]*\(")  # x.sampler.set_epoch(
JOINS_AS_LOCAL_RANK = re.compile(r"init_process_group\((?:[^()]|\([^()]*\))*\brank[ \t]*=[ \t]*(\w+\.)?local_rank\b")
LOCAL_RANK_READ = re.compile(r"\blocal_rank[ \t]*=[^=\n][^\n]*"
                             r"(?:[\"'](?:LOCAL_RANK|SLURM_LOCALID)[\"']|get_local_rank\(\))")
LOCAL_RANK_OPTION = re.compile(r"add_argument\([^)]*[\"']--local[_-]rank[\"']")  # the launcher's --local_rank
LOCAL_RANK_FROM_OPTION = re.compile(r"(?<![\w.])local_rank[ \t]*=[ \t]*(?!self\.)\w+\.local_rank[ \t]*(?:[#\n]|$)")
ATTRIBUTE_SET = re.compile(r"[\w)\]]\.([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)[ \t]*([^\n]*)")  # `<x>.attr = value`
IF_HEADER = re.compile(r"[ \t]*(?:el)?if[ \t]+(.*?)[ \t]*:[ \t]*(?:#[^\n]*|[\w.()\[\]'\"]*)")
TARGET_START = re.compile(r"[\w.()\[\]'\"]*")  # what comes before `.attr` when the assignment starts its line
RANK_ZERO_TEST = re.compile(  # `rank == 0`, `opt.rank % opt.ngpus_per_node == 0`, `get_rank() == 0`, `not args.rank`
    r"\(?[ \t]*(?:[A-Za-z_][\w.]*\.)?(?:get_)?(?:global_|local_)?rank(?:\(\))?[ \t]*(?:%[ \t]*[\w.()]+[ \t]*)?\)?"
    r"[ \t]*==[ \t]*0|not[ \t]+(?:[A-Za-z_][\w.]*\.)?(?:get_)?(?:global_|local_)?rank(?:\(\))?")
NODE_FACTS = re.compile(  # what launch.shows_several_nodes reads in a tree, here in a file's text (comments
    # removed): a read of a node variable (not `os.environ["NODE_RANK"] = ...`), a name, an option
    r"(?:environ(?:\.get)?|getenv)[ \t]*[\[(][ \t]*[\"'](?:NODE_RANK|GROUP_RANK|SLURM_NODEID|SLURM_NNODES|"
    r"SLURM_JOB_NUM_NODES)[\"'](?![ \t]*\][ \t]*=(?!=))"
    r"|(?<![A-Za-z0-9\"'])(?i:n[_-]?nodes|num[_-]nodes|node[_-]rank|node[_-]id|machine[_-]rank|num[_-]machines)"
    r"(?![A-Za-z0-9])|[\"']--?(?:nodes|nr)[\"']|\b(?:args|opts?|config|cfg|conf|hparams|params|flags|FLAGS)\."
    r"(?:nodes|nr)\b")
SPAWNS = re.compile(r"\b(?:spawn|start_processes)[ \t]*\(")
REPEATS = re.compile(r"^[ \t]*(?:async[ \t]+)?for[ \t][^\n]*(?i:epoch)[^\n]*:|"
                     r"^[ \t]*while[ \t]+(?:True|1)[ \t]*:", re.M)
RANK_TEST_FUNCTION = re.compile(r"^def[ \t]+(\w+)\(\)[^\n]*:[ \t]*\n(?:[ \t]+(?:\"\"\"[^\n]*\"\"\"|#[^\n]*)?\n)*"
                                r"[ \t]+return[ \t]+[^\n]*" + RANK_READ + r"[ \t]*(?:==|!=)[ \t]*0\b", re.M)


STATE_DICT_OWNER = re.compile(r"(\w+)(?:\.module)?\.state_dict\(\)")
SAVED_FILE_NAME = re.compile(r"([\w.{}%-]*\.(?:pth?|pt|ckpt|tar|bin|safetensors))\b")
NO_TENSORS = re.compile(r"sched|lr_|warmup", re.I)


def gpu_saves_in(text):
    """(file names, owners) of each torch.save( call in a file's text that saves a state_dict() (not a
    scheduler's) with nothing moved to the CPU: its call text, read to its closing parenthesis."""
    found = []
    for match in TORCH_SAVE.finditer(text):
        depth, end = 1, match.end()
        while depth and end < len(text) and end - match.end() < 2000:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        call = text[match.end():end]
        owners = {o for o in STATE_DICT_OWNER.findall(call) if not NO_TENSORS.search(o)}
        if owners and ".cpu()" not in call and "'cpu'" not in call and '"cpu"' not in call:
            found.append((frozenset(SAVED_FILE_NAME.findall(call)), frozenset(owners - {"self", "module"})))
    return found


def folder_facts(paths):
    """For each file of a folder given on the command line: what the folder's other files say, read once per
    folder (a folder is one program: a gather in utils.py counts for the evaluation in main.py). Today: the
    names the folder's Python files call, read from their text (linear; no second parse)."""
    facts = {}
    for root in paths:
        if root.is_dir():
            files = list(files_under([root]))
            names, classes, rank_attributes, rank_tests, imported = set(), {}, set(), set(), set()
            local = spawns = False  # the rendezvous on this machine, processes started by mp.spawn
            local_join = False  # init_process_group(..., rank=local_rank), local_rank read from LOCAL_RANK
            joins_option = local_option = False  # rank=args.local_rank; an option --local_rank (the launcher's)
            attribute_sets = []  # (attribute, where) of each `<x>.attr = value` (attribute_assignments)
            saves, built, gpu_saves = 0, set(), []
            modules = {p.stem for p in files} | {p.name for p in root.rglob("*") if p.is_dir()}
            referred, entry_point = set(), False
            repeats = False  # a loop over epochs, or a `while True:`, in some file of the folder
            several_nodes = False  # a file reads a node's rank or the number of nodes (DDP026)
            for path in files:
                if path.suffix == ".py":
                    try:
                        text = path.read_text(encoding="utf-8", errors="replace")
                    except OSError:
                        continue
                    referred.update(referred_in_text(text, modules))
                    entry_point = entry_point or bool(MAIN_GUARD.search(text)) or any(
                        not keyword.iskeyword(name) and name != "print" for name in TOP_LEVEL_CALL.findall(text))
                    names.update(CALLED.findall(text))
                    code = COMMENT.sub("", text)  # (the text without comments, read by three facts)
                    built.update(BUILT.findall(code))
                    rank_attributes.update(RANK_ATTRIBUTE.findall(text))
                    rank_tests.update(RANK_TEST_FUNCTION.findall(text))
                    imported.update(n for group in FROM_IMPORT.findall(text) for n in IMPORTED_NAME.findall(group))
                    local = local or bool(LOCAL_RENDEZVOUS.search(text))
                    spawns = spawns or bool(SPAWNS.search(text))
                    joined = JOINS_AS_LOCAL_RANK.search(text)
                    prefix = joined.group(1) if joined else None
                    if prefix and prefix != "self.":  # rank=args.local_rank
                        joins_option = True
                    elif joined:
                        local_join = local_join or bool(LOCAL_RANK_READ.search(text))
                        joins_option = joins_option or bool(LOCAL_RANK_FROM_OPTION.search(text))
                    local_option = local_option or bool(LOCAL_RANK_OPTION.search(text))
                    attribute_sets.extend(attribute_assignments(text))
                    saves += len(TORCH_SAVE.findall(text))
                    gpu_saves.extend(gpu_saves_in(code))
                    repeats = repeats or bool(REPEATS.search(text))
                    several_nodes = several_nodes or bool(NODE_FACTS.search(code))
                    classes.update(class_bodies(text))
            shared = FolderFacts(names)
            shared.buffered_classes = buffered_classes(classes)
            shared.classes = frozenset(classes)
            shared.epoch_setters = frozenset(name for name, body in classes.items()
                                             if SAMPLER_SET_EPOCH.search(COMMENT.sub("", body)))
            shared.rank_attributes, shared.rank_test_functions = frozenset(rank_attributes), frozenset(rank_tests)
            shared.single_node = local and spawns or local_join or joins_option and local_option
            shared.rank_flags = rank_flag_attributes(attribute_sets, rank_tests)
            shared.imported = frozenset(imported)
            shared.torch_saves, shared.built = saves, frozenset(built)
            shared.gpu_saves = tuple(gpu_saves)
            shared.referred, shared.modules = frozenset(referred), frozenset(modules)
            shared.entry_point = entry_point
            shared.repeats = repeats
            shared.several_nodes = several_nodes
            facts.update((path, shared) for path in files)
    return facts


def attribute_assignments(text):
    """(attribute, where) for each `<x>.attr = value` in a file's text: where is "other" for a value that is not
    the constant True or False, "false" for False, and for True the test of the `if` / `elif` whose body holds
    it (found by indentation, at most 50 lines up; None when there is none, or it is not a plain `if`)."""
    found = []
    for match in ATTRIBUTE_SET.finditer(text):
        attr, value = match.groups()
        value = value.partition("#")[0].strip().rstrip(";").strip()
        if value != "True":
            found.append((attr, "false" if value == "False" else "other"))
            continue
        start = text.rfind("\n", 0, match.start()) + 1
        before = text[start:match.start() + 1]  # up to the end of the object (`opt`)
        lead = before.lstrip()
        header = IF_HEADER.fullmatch(before)  # `if rank == 0: opt.log = True`
        if header is None and TARGET_START.fullmatch(lead):  # the statement starts the line: its block's header
            indent, end = len(before) - len(lead), start - 1
            for _ in range(50):
                if end <= 0:
                    break
                line_start = text.rfind("\n", 0, end) + 1
                line, end = text[line_start:end], line_start - 1
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                if len(line) - len(line.lstrip()) < indent:
                    header = IF_HEADER.fullmatch(line)
                    break
        found.append((attr, header.group(1) if header else None))
    return found


def rank_flag_attributes(assignments, rank_tests=frozenset()):
    """The attributes a folder keeps a rank test in: every assignment of `<x>.attr` in its files is True or
    False, False once at least, and each True is in the body of a test of rank 0 (`if opt.rank %
    opt.ngpus_per_node == 0: opt.log = True`, `if rank == 0:`, `if is_main_process():` with a helper of the
    folder that returns a rank test); then `if opt.log:` is a rank test in any file of the folder."""
    sides = {}
    for attr, where in assignments:
        if where not in ("false", "other"):
            where = "rank" if where is not None and (RANK_ZERO_TEST.fullmatch(where) or (
                where.endswith("()") and where[:-2].rpartition(".")[2] in rank_tests)) else "all"
        sides.setdefault(attr, set()).add(where)
    return frozenset(attr for attr, found in sides.items() if found == {"rank", "false"})


class FolderFacts(frozenset):
    """The names a folder's Python files call, with what else the folder says: buffered_classes, the classes
    of its files whose modules hold buffers (BatchNorm, register_buffer), which DDP broadcasts in forward."""
    buffered_classes = frozenset()
    rank_attributes = frozenset()  # attributes a file of the folder sets from a rank: `args.rank = get_rank()`
    rank_test_functions = frozenset()  # helpers that return a rank test: `def is_main_process(): return ...`
    single_node = False  # MASTER_ADDR = "localhost" (or tcp://127.0.0.1:...) and mp.spawn: one machine
    rank_flags = frozenset()  # attributes that hold a rank test: `opt.log`, set True only under `if rank == 0:`
    torch_saves = None  # how many torch.save( the folder's files write
    gpu_saves = ()  # (file names, owners) of each torch.save( of a state_dict() not moved to the CPU
    built = frozenset()  # the names called in code (not `class Net(`, `def f(`, nor in a comment): Net() builds one
    imported = frozenset()  # the names that `from ... import a, b as c` brings into a file: perhaps called there
    referred = frozenset()  # the names its files refer to other than by a def (referred_in_text)
    modules = frozenset()  # the names of its files (stems) and folders: what `import utils` finds in it
    entry_point = False  # a file runs something: `if __name__ == "__main__":` or a call at column 0 (`main()`)
    repeats = False  # a file of the folder loops over epochs (`for epoch in ...:`) or `while True:` (DDP002)
    classes = frozenset()  # the names of the top-level classes its files define
    epoch_setters = frozenset()  # those of its classes whose text calls `<x>.sampler.set_epoch(` (DDP002)
    several_nodes = False  # a file reads a node's rank or the number of nodes: NODE_RANK, args.nnodes (DDP026)


MAIN_GUARD = re.compile(r"^if[ \t]+__name__[ \t]*==", re.M)
TOP_LEVEL_CALL = re.compile(r"^([A-Za-z_]\w*)[ \t]*\(", re.M)
REFERENCE_TOKENS = re.compile(  # a string, a comment, a def's or class's name, `root.attr`, a word: in order
    r"(?P<prefix>[rRbBuUfF]{0,2})(?P<string>\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|\"(?:\\.|[^\"\\\n])*\"|"
    r"'(?:\\.|[^'\\\n])*')|#[^\n]*|\b(?:def|class)[ \t]+\w+|(?P<root>[A-Za-z_]\w*)[ \t]*\.[ \t]*(?P<attr>[A-Za-z_]\w*)|"
    r"(?P<word>[A-Za-z_]\w*)")
IMPORT_LINE = re.compile(r"^[ \t]*import[ \t]+([^\n#;]*)|^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+"
                         r"(\([^)]*\)|[^\n#;]*)", re.M)
WORD = re.compile(r"[A-Za-z_]\w*")


def referred_in_text(text, modules):
    """The names a file's text refers to, as Module.referred_names reads them from a tree, here from the text
    (a folder's other files are not parsed twice): each word of its code, not a def's nor a class's own name, not
    an attribute of a module imported from outside the folder (torch.save), not in a comment; of a string, its text
    where it is a name (getattr dispatch), every word of an f-string."""
    external = set()
    for plain, dots, module, names in IMPORT_LINE.findall(text):
        if plain:
            for part in plain.split(","):
                words = part.split()
                if words and words[0].split(".")[0] not in modules:
                    external.add(words[-1] if len(words) == 3 and words[1] == "as" else words[0].split(".")[0])
        elif not dots and module.split(".")[0] not in modules:
            for part in names.strip("()").split(","):
                words = part.split()
                if words:
                    external.add(words[-1])
    found = set()
    for match in REFERENCE_TOKENS.finditer(text):
        word, root, string = match.group("word", "root", "string")
        if word is not None:
            found.add(word)
        elif root is not None:
            found.add(root)
            if root not in external:
                found.add(match.group("attr"))
        elif string is not None:
            inner = string.strip("\"'")
            if "f" in match.group("prefix").lower():
                found.update(WORD.findall(inner))
            elif inner.isidentifier():
                found.add(inner)
    return found


CLASS_LINE = re.compile(r"^class\s+([A-Za-z_]\w*)[^\n]*:", re.M)
TOP_LEVEL = re.compile(r"^(?=[^\s#])", re.M)


def class_bodies(text):
    """{class name: the text of its definition} for the top-level classes of a file, read from the text."""
    found = {}
    for match in CLASS_LINE.finditer(text):
        end = TOP_LEVEL.search(text, match.end() + 1)
        found[match.group(1)] = text[match.end():end.start() if end else len(text)]
    return found


def buffered_classes(classes):
    """The classes (by name) whose text builds a layer with buffers or a class that does, to a fixed point."""
    from .program import BUFFERS_TEXT
    found = {name for name, body in classes.items() if BUFFERS_TEXT.search(body)}
    calls = {name: set(CALLED.findall(body)) for name, body in classes.items() if name not in found}
    callers = {}  # class name -> the classes whose text calls it
    for name, called in calls.items():
        for other in called:
            callers.setdefault(other, []).append(name)
    todo = list(found)  # a worklist: linear in the calls
    while todo:
        for name in callers.get(todo.pop(), ()):
            if name not in found:
                found.add(name)
                todo.append(name)
    return frozenset(found)


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
# Which rules are reported: --select / --ignore / --extend-select, or [tool.ddp-doctor] in pyproject.toml


class UsageError(Exception):
    """Bad arguments or a bad configuration: one line, exit code 2."""


def selectors(values, where):
    """Codes or prefixes (DDP011, DDP01, DDP) or ALL, from comma-separated strings; UsageError if one selects
    no rule."""
    found = [part.strip().upper() for value in values for part in value.split(",") if part.strip()]
    for s in found:
        if s != "ALL" and not any(code.startswith(s) for code in RULES):
            raise UsageError(f"{where}: {s!r} is not a rule code or prefix (the codes are DDP000 to {list(RULES)[-1]},"
                             f" or ALL)")
    return found


class Selection:
    """Which codes are reported. select: selectors, or None for the default (every error and warning);
    extend_select adds to it; ignore removes. A more specific selector wins (DDP0 in ignore does not undo
    DDP012 in select; DDP012 in ignore undoes ALL); a tie goes to ignore. DDP000 is always reported."""

    def __init__(self, select=None, ignore=(), extend_select=()):
        self.select, self.ignore, self.extend_select = select, list(ignore), list(extend_select)

    def __call__(self, code):
        if code == "DDP000":
            return True
        chosen = [0] if self.select is None and LEVELS[code] in DEFAULT_LEVELS else []
        chosen += [specificity(s) for s in [*(self.select or []), *self.extend_select] if matches(s, code)]
        dropped = [specificity(s) for s in self.ignore if matches(s, code)]
        return bool(chosen) and (not dropped or max(chosen) > max(dropped))

    def is_default(self):
        return self.select is None and not self.ignore and not self.extend_select

    def merged(self, select=None, ignore=(), extend_select=()):
        """This selection (a configuration's) with the command line's: its select replaces, the rest adds."""
        return Selection(self.select if select is None else select, [*self.ignore, *ignore],
                         [*self.extend_select, *extend_select])


def matches(selector, code):
    return selector == "ALL" or code.startswith(selector)


def specificity(selector):
    return 0 if selector == "ALL" else len(selector)


CONFIG_KEYS = {"select", "ignore", "extend-select"}


def find_config(folder, cache):
    """The Selection of the nearest pyproject.toml with a [tool.ddp-doctor] table, from folder upward (the
    default Selection where there is none)."""
    folder = folder.resolve()
    if folder not in cache:
        pyproject = folder / "pyproject.toml"
        table = None
        if pyproject.is_file():
            import tomllib  # here, not at the top: most runs find no pyproject.toml (5 ms of a start saved)

            try:
                table = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("ddp-doctor")
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
                raise UsageError(f"{pyproject}: cannot read it ({error})") from None
        if table is not None:
            cache[folder] = config_selection(table, pyproject)
        else:
            cache[folder] = Selection() if folder.parent == folder else find_config(folder.parent, cache)
    return cache[folder]


def config_selection(table, pyproject):
    where = f"{pyproject}: [tool.ddp-doctor]"
    if not isinstance(table, dict) or set(table) - CONFIG_KEYS:
        unknown = sorted(set(table) - CONFIG_KEYS) if isinstance(table, dict) else "not a table"
        raise UsageError(f"{where}: {unknown} (the keys are {', '.join(sorted(CONFIG_KEYS))})")
    for key, value in table.items():
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise UsageError(f"{where} {key}: give a list of codes or prefixes, e.g. [\"ALL\"] or [\"DDP012\"]")
    return Selection(selectors(table["select"], f"{where} select") if "select" in table else None,
                     selectors(table.get("ignore", []), f"{where} ignore"),
                     selectors(table.get("extend-select", []), f"{where} extend-select"))


# ---------------------------------------------------------------------------------------------------
# The command line


def explain(code):
    name, msg, why, fix, lesson = RULES[code]
    reason = next((line.split(":", 1)[1].strip().rstrip(".") for rule in RULE_FUNCTIONS
                   for line in rule.__doc__.splitlines()
                   if code in rule.__doc__.split(":")[0] and line.strip().lower().startswith(LEVELS[code] + ":")),
                  "a file it cannot parse is not checked at all")
    return (f"{code} {name}: {msg.format(detail='...')}\n\nLevel: {LEVELS[code]} ({reason})\n\nWhy: {why}\n\n"
            f"Fix: {fix}\n\nLesson: {lesson}\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="ddp_doctor.py", description=DESCRIPTION,
        epilog="Levels: error (a hang, a crash, a wrong result or lost work), warning (likely wrong), advice "
               "(portability, style, speed, or a mistake that shows only on some launches: several nodes, a world "
               "size that does not divide the set, another GPU list, unless the program shows such a launch). "
               "By default errors and warnings are reported; advice needs --select "
               "(ALL, codes or prefixes) or --extend-select, here or in [tool.ddp-doctor] of the pyproject.toml "
               "found upward from each file. Exit code: 0 nothing reported, 1 findings reported (DDP000 included), "
               "2 bad arguments or configuration, 3 an internal error of the doctor (the file is named).")
    parser.add_argument("paths", nargs="*", type=Path, help="Python files, notebooks, or folders of them")
    parser.add_argument("--format", choices=["text", "json", "github"], default="text",
                        help="github: GitHub Actions annotations (::error, ::warning, ::notice for advice)")
    parser.add_argument("--select", action="append", metavar="CODES",
                        help="report only these codes or prefixes, comma-separated (ALL: every rule, advice too)")
    parser.add_argument("--extend-select", action="append", default=[], metavar="CODES",
                        help="report these as well as the default (or the configured) selection")
    parser.add_argument("--ignore", action="append", default=[], metavar="CODES",
                        help="do not report these codes or prefixes")
    parser.add_argument("--explain", metavar="DDP###", help="why a rule exists, its level, its fix and its lesson")
    parser.add_argument("--list", action="store_true", help="every rule: code, level, name, message")
    parser.add_argument("--show-suppressed", action="store_true",
                        help="also print the findings an ignore comment hides")
    args = parser.parse_args(argv)
    try:
        args.select = None if args.select is None else selectors(args.select, "--select")
        args.ignore = selectors(args.ignore, "--ignore")
        args.extend_select = selectors(args.extend_select, "--extend-select")
    except UsageError as error:
        parser.error(str(error))
    if args.explain is not None:
        args.explain = args.explain.upper()
        if args.explain not in RULES:
            parser.error(f"unknown code {args.explain!r}: the codes are {', '.join(RULES)}")
    elif not args.list and not args.paths:
        parser.error("give a file or folder to check (or --explain DDP###, --list)")
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    args.error = parser.error
    return args


def github_escape(text, property_value=False):
    """GitHub's workflow-command escaping: %, CR, LF always; ':' and ',' in a property's value too."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_value else text


GITHUB_COMMANDS = {"error": "error", "warning": "warning", "advice": "notice"}


def github_line(f):
    """::error file=F,line=L,col=C,title=DDP011::message (in a notebook the cell goes into the message, since
    the line of a cell is not a line of the file)."""
    where = f"file={github_escape(f.path, True)}"
    text = f"{f.code} {f.message}"
    if f.cell is None:
        where += f",line={f.line},col={max(f.col, 1)}"
    else:
        text = f"cell {f.cell}, line {f.line}: {text}"
    return f"::{GITHUB_COMMANDS[f.severity]} {where},title={f.code}::{github_escape(text)}"


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 or word == "advice" else "s")


def hard_exit(status):
    """The end of a command-line run, main(exiting=True): the report flushed, the process leaves with os._exit,
    as mypy does (mypy.util.hard_exit). A 200k-line file's tree is three million objects: freeing them one by
    one costs about 0.35 s, and the system takes the memory back at once."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main(argv=None, exiting=False):
    """The command line's work: the exit status returned. exiting: the process ends right after (hard_exit),
    so nothing needs freeing: the cycle collector stays off (gc_paused then leaves it off; a file's check
    leaves no cycles to collect) and the last program model is kept (Leaving.kept). Called as a function,
    main() frees everything as it goes."""
    if exiting:
        gc.disable()
        Leaving.quickly = True
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.explain:
        print(explain(args.explain), end="")
        return EXIT_CLEAN
    if args.list:
        for code, (name, msg, *_rest) in RULES.items():
            print(f"{code}  {LEVELS[code]:8s} {name:32s} {msg.format(detail='...')}")
        return EXIT_CLEAN
    started = time.perf_counter()
    files = list(files_under(args.paths))
    folders = folder_facts(args.paths)
    configs = {}
    try:
        selections = [find_config(path.parent, configs).merged(args.select, args.ignore, args.extend_select)
                      for path in files]
    except UsageError as error:
        args.error(str(error))
    findings, internal, not_selected = [], [], 0
    for path, selection in zip(files, selections):
        selected = {}  # code -> whether this file's selection reports it: asked once per code
        errors = []
        try:
            found = check_file(path, errors, folders.get(path))
        except Exception as error:  # a bug in the doctor, outside any one rule: name the file, go on
            found, errors = [], [f"{type(error).__name__}: {error}"]
        internal += [(str(path), e) for e in errors]
        for f in found:
            if f.code not in selected:
                selected[f.code] = selection(f.code)
        kept = [f for f in found if selected[f.code]]
        not_selected += sum(not f.suppressed for f in found) - sum(not f.suppressed for f in kept)
        findings += sorted(kept, key=lambda f: (f.cell or 0, f.line, f.col))
    seconds = time.perf_counter() - started
    active = [f for f in findings if not f.suppressed]
    levels = {level: sum(f.severity == level for f in active) for level in LEVEL_NAMES}
    summary = dict(files=len(files), findings=len(active), suppressed=len(findings) - len(active),
                   not_selected=not_selected, **levels, internal_errors=len(internal), seconds=round(seconds, 3))
    if args.format == "json":
        print(json.dumps(dict(findings=[vars(f) for f in findings], summary=summary,
                              internal_errors=[dict(path=p, error=e) for p, e in internal]), indent=1))
    else:
        for f in findings:
            if args.format == "github" and not f.suppressed:
                print(github_line(f))
            elif args.format == "text" and (not f.suppressed or args.show_suppressed):
                print(f"{f.place()}: {f.code} {f.message}" + (" (suppressed)" if f.suppressed else ""))
        if args.format == "github":
            for path, error in internal:
                print(f"::error file={github_escape(path, True)},title=ddp-doctor internal error::"
                      f"{github_escape(error)}")
        what = f"{len(active)} finding(s)" if active else "no findings"
        counts = ", ".join(plural(n, level) for level, n in levels.items() if n)
        print(f"ddp-doctor: {what} in {len(files)} file(s), {summary['suppressed']} suppressed"
              + (f", {not_selected} not selected" if not_selected else "")
              + (" (advice: --select ALL shows it)" if not_selected and all(s.is_default() for s in selections) else "")
              + (f" [{counts}]" if counts else "") + f" ({seconds:.2f} s)")
    for path, error in internal:
        print(f"ddp_doctor.py: internal error while checking {path}: {error} (a bug in the doctor, not in the "
              f"file; the other files and rules were checked)", file=sys.stderr)
    if internal:
        return EXIT_INTERNAL
    return EXIT_FINDINGS if active else EXIT_CLEAN
