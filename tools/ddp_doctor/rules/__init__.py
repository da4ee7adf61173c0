"""The rules, one module per family. A rule is one function `rule_*(m)` in its family's module, taking a
program.Module and yielding (node, code, detail), with its codes in that module's RULES table; this package
collects both, so a new rule needs nothing here (its case and near miss go in tests/doctor_cases/)."""

import re

from . import checkpoints, data, launch, logs, model, sync

FAMILIES = [launch, data, checkpoints, sync, logs, model]

# code -> (name, message, why, fix, lesson), in code order. The codes are stable.
RULES = {
    "DDP000": ("syntax-error", "cannot parse this file: {detail}",
               "The doctor reads code with Python's own parser; a file it cannot parse is not checked at all.",
               "Fix the syntax error (python -m py_compile FILE says the same).",
               "-"),
}
RULES.update(sorted((code, entry) for family in FAMILIES for code, entry in family.RULES.items()))


def codes_of(rule):
    """The codes a rule function reports, as its docstring names them before the first colon."""
    return re.findall(r"DDP\d{3}", rule.__doc__.split(":")[0])


RULE_FUNCTIONS = sorted((f for family in FAMILIES for name, f in vars(family).items()
                         if name.startswith("rule_") and callable(f)), key=lambda f: codes_of(f)[0])

LEVEL_NAMES = ("error", "warning", "advice")  # errors: a hang, a crash, a wrong result or lost work;
# warnings: likely wrong (both: on every launch the program allows); advice: portability, style, speed, or wrong
# only on some launches the program does not show. By default the doctor reports errors and warnings.
LEVEL_LINE = re.compile(r"^\s*(Error|Warning|Advice): (\S.*)$", re.M)


def level_of(rule):
    """A rule's level, from the line of its docstring that gives it with its reason ("Error: a hang ...")."""
    lines = LEVEL_LINE.findall(rule.__doc__)
    if len(lines) != 1:
        raise ValueError(f"{rule.__name__}: its docstring needs one line 'Error|Warning|Advice: why'")
    return lines[0][0].lower()


LEVELS = {"DDP000": "error", **{code: level_of(rule) for rule in RULE_FUNCTIONS for code in codes_of(rule)}}
LEVELS = {code: LEVELS[code] for code in RULES}  # in code order
DEFAULT_LEVELS = ("error", "warning")
