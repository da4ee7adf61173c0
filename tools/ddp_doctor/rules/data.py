"""How the data is split over the ranks: samplers, loaders, evaluation shards.

Each rule_* function takes a program.Module and yields (node, code, detail); RULES holds its codes:
code -> (name, message, why, fix, lesson)."""

import ast
import re

from ..program import calls_in, dotted, is_const, keyword, last_name, text_mentions

RULES = {
    "DDP002": ("sampler-without-set-epoch", "DistributedSampler without sampler.set_epoch(epoch) in the epoch loop",
               "A DistributedSampler shuffles with a seed plus the epoch it was last told. Without set_epoch() "
               "its epoch stays 0, so every epoch visits the data in exactly the same order.",
               "Call sampler.set_epoch(epoch) at the start of each epoch, before iterating the loader. "
               "Conservative: silent when the sampler does not shuffle, when the file has no loop over epochs, "
               "and when any set_epoch() call appears in the file.",
               "05 · Rank-aware training; 06 · Why DDP is correct"),
    "DDP003": ("shuffle-with-sampler", "shuffle=True next to a sampler: DataLoader refuses the pair",
               "A sampler decides the order; DataLoader raises 'sampler option is mutually exclusive with "
               "shuffle'. With a DistributedSampler the shuffling is the sampler's job (shuffle=True is its default).",
               "Drop shuffle=True from the DataLoader; pass shuffle to DistributedSampler(dataset, shuffle=True).",
               "04 · From single device to DDP"),
    "DDP004": ("ddp-loader-without-sampler", "the training DataLoader of a DDP script has no sampler: "
               "every rank trains on the whole dataset",
               "Without a DistributedSampler (or another way to shard), each of N processes goes through all "
               "the data every epoch: N times the work for the same result, and an epoch that is not one.",
               "DataLoader(dataset, batch_size=..., sampler=DistributedSampler(dataset)). Conservative: only "
               "a loader built in the same function as the loop that calls backward() on it, in a file that "
               "wraps a model in DDP, over a dataset that cannot shard itself (a TensorDataset, a torchvision "
               "dataset, a class of the file with __getitem__ and no __iter__), with no rank or world size in "
               "sight (manual sharding).",
               "04 · From single device to DDP"),
    "DDP018": ("padded-evaluation", "DistributedSampler over an evaluation set repeats samples when its size "
               "does not divide by the world size: a metric summed over the shards is not exact",
               "DistributedSampler repeats samples until every rank has the same number (drop_last=False), "
               "so with a size that does not divide by the world size the summed counts include duplicates: "
               "the metric is close, not exact.",
               "Shard without padding (rank r takes r, r + N, ...) and sum the counts, or gather (index, "
               "result) and count each index once. Conservative: only a sampler over a dataset named "
               "val/test/eval, without drop_last=True, in a file (and folder) that combines values over the ranks "
               "(a reduce, a sum over ranks) but gathers nothing, and never tests "
               "len(...) % ... itself.",
               "05 · Rank-aware training"),
}


def distributed_samplers(m):
    return m.named_calls("DistributedSampler")


def rule_sampler_without_set_epoch(m):
    """DDP002: a shuffling DistributedSampler, an epoch loop, and no set_epoch for it: none anywhere, or only
    on other samplers that the file names (`val_sampler.set_epoch(epoch)` while the training sampler is never told).

    Error: a wrong result: every epoch visits the data in the same order.
    """
    if all(runs_once(loop) for loop in m.epoch_loops()):
        return  # (no epoch loop, or only `for epoch in range(1)`: one epoch, whose order set_epoch never changes)
    told, looping = None, None  # with some set_epoch: the samplers it reaches by name, the scopes with epochs
    if "set_epoch" in m.call_names:
        bound = {}  # (function, name) -> the DistributedSampler calls assigned to it there
        for call in distributed_samplers(m):
            parent = m.parent.get(call)
            if isinstance(parent, ast.Assign):
                for t in parent.targets:
                    bound.setdefault((m.scope(call), dotted(t)), []).append(call)
        told = set()
        for c in m.named_calls("set_epoch"):
            name = dotted(c.func.value) if isinstance(c.func, ast.Attribute) else ""
            calls = bound.get((m.scope(c), name), bound.get((None, name)))
            if not calls:
                return  # a set_epoch the doctor cannot follow (loader.sampler, a helper): it may reach any sampler
            told.update(calls)  # (every sampler bound to that name there: a name may be bound again)
        looping = {m.scope(loop) for loop in m.epoch_loops() if not runs_once(loop)}
    evalish = re.compile(r"val|test|eval", re.I)
    for call in distributed_samplers(m):
        data = call.args[0] if call.args else keyword(call, "dataset")
        if told is not None and (call in told or m.scope(call) not in looping):
            continue  # told, or made where no epoch loop runs (a sampler for one batch)
        if not is_const(keyword(call, "shuffle"), False) and not (data is not None and text_mentions(data, evalish)):
            yield call, "DDP002", ""


def runs_once(loop):
    """`for epoch in range(1)` (or range(0, 1)): a loop of one epoch, written as a number."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and last_name(it) == "range" and it.args and not it.keywords):
        return False
    if len(it.args) == 1:
        return is_const(it.args[0], 1) or is_const(it.args[0], 0)
    bounds = [a.value for a in it.args if isinstance(a, ast.Constant) and type(a.value) is int]
    return len(it.args) == len(bounds) == 2 and bounds[1] - bounds[0] <= 1


def rule_shuffle_with_sampler(m):
    """DDP003: DataLoader(..., sampler=..., shuffle=True).

    Error: a crash: DataLoader refuses a sampler with shuffle=True.
    """
    for call in m.named_calls("DataLoader"):
        if is_const(keyword(call, "shuffle"), True):
            sampler = keyword(call, "sampler")
            if sampler is not None and not is_const(sampler, None):
                yield keyword(call, "shuffle"), "DDP003", ""


def rule_ddp_loader_without_sampler(m):
    """DDP004: in a DDP file, the loader a backward() loop iterates has no sampler.

    Error: a wrong result: every rank trains on the whole dataset, N times the work per epoch.
    """
    if not m.uses_ddp:
        return
    for loop in m.of_type(ast.For, ast.AsyncFor):
        it = loop.iter.args[0] if isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "enumerate" \
            and loop.iter.args else loop.iter
        if not isinstance(it, ast.Name):
            continue
        loaders = m.bound_to(m.scope(loop), lambda v: isinstance(v, ast.Call) and last_name(v) == "DataLoader")
        call = loaders.get(it.id)
        if call is None or keyword(call, "sampler") is not None or keyword(call, "batch_sampler") is not None:
            continue
        if "backward" not in {last_name(c) for c in calls_in(loop)}:  # last: it reads the whole loop
            continue
        if any(k.arg is None for k in call.keywords) or text_mentions(call, re.compile(r"rank|world", re.I)):
            continue
        source = call.args[0] if call.args else keyword(call, "dataset")
        if isinstance(source, ast.Name):
            source = m.bound_to(m.scope(loop), lambda v: True).get(source.id)
        if map_style_dataset(m, source):  # an IterableDataset or a stream may shard itself
            yield call, "DDP004", ""


MAP_STYLE = {"TensorDataset", "ImageFolder", "DatasetFolder", "MNIST", "FashionMNIST", "CIFAR10", "CIFAR100",
             "ImageNet", "SVHN", "STL10"}


def map_style_dataset(m, made):
    """Whether made builds a dataset that does not shard itself: a TensorDataset, a torchvision dataset, or
    a class of this file with __getitem__ and no __iter__; and nothing in the call mentions a rank or shard."""
    if not isinstance(made, ast.Call) or text_mentions(made, re.compile(r"rank|world|shard|split", re.I)):
        return False
    name = last_name(made)
    if name in MAP_STYLE:
        return True
    classes = [n for n in m.of_type(ast.ClassDef) if n.name == name]
    methods = {f.name for c in classes for f in c.body if isinstance(f, ast.FunctionDef)}
    return bool(classes) and "__getitem__" in methods and "__iter__" not in methods


def rule_padded_evaluation(m):
    """DDP018: DistributedSampler(val_set) with padding, in a function that gathers nothing.

    Warning: likely wrong: the metric counts some samples twice (close, not exact).
    """
    evalish = re.compile(r"val|test|eval|valid", re.I)
    for call in distributed_samplers(m):
        data = call.args[0] if call.args else keyword(call, "dataset")
        if data is None or not text_mentions(data, evalish) or is_const(keyword(call, "drop_last"), True):
            continue
        if any("gather" in name for name in m.call_names | m.folder_call_names):
            continue  # the file, or another file of its folder, gathers results: it may count each index once
        if checks_divisibility(m):
            continue  # the file tests len(dataset) % world itself: it warns, pads or falls back knowingly
        if not any(COMBINES.search(name) for name in m.call_names | m.folder_call_names):
            continue  # nothing is combined over the ranks: each rank's metric is its own shard's, not a padded sum
        yield call, "DDP018", ""


COMBINES = re.compile(r"reduce|dist_sum|sum_over|all_sum", re.I)  # calls that combine values over the ranks


def checks_divisibility(m):
    """Whether the file computes `len(...) % ...` anywhere: a script that asks whether a set divides."""
    return any(isinstance(n.op, ast.Mod) and isinstance(n.left, ast.Call) and last_name(n.left) == "len"
               for n in m.of_type(ast.BinOp))
