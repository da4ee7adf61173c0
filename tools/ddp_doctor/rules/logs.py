"""What the ranks print: unguarded log lines, a shard's loss logged as the model's.

Each rule_* function takes a program.Module and yields (node, code, detail); RULES holds its codes:
code -> (name, message, why, fix, lesson)."""

import ast
import re

from ..program import (
    RANKISH,
    asks_how_launched,
    calls_and_names,
    calls_in,
    is_batch_loop,
    keyword,
    last_name,
    names_in,
    text_mentions,
    unparse,
)

RULES = {
    "DDP006": ("unguarded-log", "every rank logs this line: guard it with `if rank == 0:` or say the rank",
               "Every process runs the loop, so an unguarded print or log call appears N times, each copy "
               "with only that rank's numbers, and the lines of N processes run into each other.",
               "Log from rank 0 (with numbers all-reduced over the ranks), or prefix a deliberate per-rank "
               "line with its rank. Conservative: only prints and logging calls inside a loop over epochs or "
               "batches, not to stderr, and not mentioning a rank.",
               "04 · From single device to DDP; 05 · Rank-aware training"),
    "DDP017": ("unreduced-logged-loss", "a loss is logged ({detail}) that is never all-reduced: it is this "
               "rank's shard only",
               "Each rank computes the loss of its own shard. Printed as it is, rank 0's loss describes 1/N "
               "of the data, not the model's loss; each rank would print a different number.",
               "Sum loss * batch and the sample counts over the ranks (dist.all_reduce, lesson 05's "
               "sum_over_ranks) and log the quotient. Conservative: silent when the function passes the value "
               "to any reduce, gather or all_reduce call.",
               "05 · Rank-aware training"),
}


def rule_unguarded_log(m):
    """DDP006: print / logging inside an epoch or batch loop, with no rank guard and no rank in the text.

    Advice: style: N copies of a line; the training itself is unaffected.
    """
    if not m.is_distributed:
        return
    loaders = set()
    for scope in [None, *[d for defs in m.functions.values() for d in defs]]:
        loaders |= set(m.bound_to(scope, lambda v: isinstance(v, ast.Call) and last_name(v) == "DataLoader"))
    for call in m.log_calls:  # the cheap question first: many log calls are in no loop
        if not in_epoch_or_batch_loop(m, call, loaders):
            continue
        if m.guarded(call) or says_which_process(call, m.rank_aliases):
            continue  # guarded, or a line that says which process it comes from
        file = keyword(call, "file")
        if file is not None and "stderr" in unparse(file):
            continue
        yield call, "DDP006", ""


def in_epoch_or_batch_loop(m, node, loaders):
    """Whether node sits in a loop over epochs or batches of its own function."""
    for a in m.ancestors(node):
        if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(a, (ast.For, ast.AsyncFor)) and (m.is_epoch_loop(a) or is_batch_loop(a, loaders)):
            return True
    return False


PROCESSISH = re.compile(r"device|gpu|hostname|pid|node", re.I)
RANK_OR_PROCESS = re.compile(f"{RANKISH.pattern}|{PROCESSISH.pattern}", re.I)


def says_which_process(call, aliases):
    """m.mentions_rank(call) or text_mentions(call, PROCESSISH), in one walk: a rank-like word or a rank alias
    (as mentions_rank reads them), or a device, gpu, hostname, pid or node."""
    if asks_how_launched(call):  # (mentions_rank says no to such a test; the device words still count)
        return text_mentions(call, PROCESSISH)
    return text_mentions(call, RANK_OR_PROCESS, aliases)


REDUCERS = re.compile(r"reduce|gather|over_ranks|all_|mean_over|average", re.I)


LOSS_CALL = re.compile(r"loss|criterion|cross_entropy|nll|mse|bce|l1|kl_div|ctc|margin", re.I)


def loss_names(m, scope):
    """Names that a loss computation assigns in this scope: loss = loss_fn(logits, y), loss = criterion(...) / k."""
    return {name for name, value in m.assignments(scope) if isinstance(value, (ast.Call, ast.BinOp)) and
            any(LOSS_CALL.search(last_name(c)) and not REDUCERS.search(last_name(c)) for c in calls_in(value))}


def rule_unreduced_logged_loss(m):
    """DDP017: a print of loss.item() (or of a sum of them) that no collective ever saw.

    Advice: exactness: the logged loss is one shard's, an estimate of the model's (all-reduce it for the figure).
    """
    if not m.is_distributed:
        return
    per_scope = {}  # scope -> (losses, reduced names, accumulators): read once per scope, not once per print
    for call in m.log_calls:
        scope = m.scope(call)
        if scope not in per_scope:
            per_scope[scope] = losses_of_scope(m, scope)
        losses, reduced, accumulators = per_scope[scope]
        if not losses:
            continue
        unreduced_losses, unreduced_sums = losses - reduced, accumulators - reduced
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            calls, names = calls_and_names(arg)  # one walk for the calls and the names
            if not (names & unreduced_losses or names & unreduced_sums):
                continue  # (most log lines of a file: no loss in them)
            for c in calls:
                if last_name(c) == "item" and isinstance(c.func, ast.Attribute) and \
                        isinstance(c.func.value, ast.Name) and c.func.value.id in unreduced_losses:
                    yield c, "DDP017", unparse(c)
            for name in names & unreduced_sums:
                yield arg, "DDP017", name


def losses_of_scope(m, scope):
    """(loss names, names that a reduce saw, names that sum loss.item()) of one function (or the module)."""
    losses = loss_names(m, scope)  # computed here: a parameter may hold a loss reduced by the caller
    if not losses:
        return losses, set(), set()
    reducers_in, holds_reducer = reducers(m)
    reduced = set()
    for c in reducers_in.get(scope, []):
        reduced |= names_in(c)
    accumulators = set()
    for n in m.statements(scope):  # one pass over the scope's statements for both questions
        kind = type(n)
        if kind is ast.Assign and n.value in holds_reducer:  # x = ... reduced ...: x is reduced too
            for t in n.targets:
                reduced |= names_in(t)
        elif kind is ast.AugAssign and type(n.target) is ast.Name and \
                any(last_name(c) == "item" and names_in(c) & losses for c in calls_in(n.value)):
            accumulators.add(n.target.id)  # total += loss.item()
    return losses, reduced, accumulators


def reducers(m):
    """The calls of the file that reduce, gather or average (by their last name), by scope, and the nodes that
    hold one (m.holders): found once per file, for every scope that logs a loss."""
    if not hasattr(m, "_reducers"):
        calls = [c for name, found in m.calls_named.items() if REDUCERS.search(name) for c in found]
        by_scope = {}
        for c in calls:
            by_scope.setdefault(m.scope(c), []).append(c)
        m._reducers = by_scope, m.holders(calls)
    return m._reducers
