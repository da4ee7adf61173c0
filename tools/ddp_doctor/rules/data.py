"""How the data is split over the ranks: samplers, loaders, evaluation shards.

Each rule_* function takes a program.Module and yields (node, code, detail); RULES holds its codes:
code -> (name, message, why, fix, lesson)."""

import ast
import re
from itertools import takewhile

from ..program import calls_in, dotted, is_const, keyword, last_name, text_mentions, unparse, walk

RULES = {
    "DDP002": ("sampler-without-set-epoch",
               "DistributedSampler without sampler.set_epoch(epoch) in the epoch loop{detail}",
               "A DistributedSampler shuffles with a seed plus the epoch it was last told. Without set_epoch() "
               "its epoch stays 0, so every epoch visits the data in exactly the same order.",
               "Call sampler.set_epoch(epoch) at the start of each epoch, before iterating the loader. "
               "Conservative: silent when the sampler does not shuffle, when the file has no loop over epochs "
               "(or one of one epoch: range(1), or a name the file binds once, to 1), "
               "and when any set_epoch() call appears in the file; a sampler that leaves the function that builds "
               "it (returned, alone or in the loader or tuple that holds it, or stored on an attribute) is judged "
               "by the whole program (the folder): silent when any set_epoch() call appears in it, or when it has "
               "no loop over epochs (nor a `while True:`), or when the function that builds it is named for "
               "evaluation (build_eval_loader, validation_dataloader); silent for a sampler built inside the epoch "
               "loop whose seed= depends on the epoch (a new order each epoch), for one built inside the epoch loop "
               "over a dataset that the same pass of the loop shuffles (rebuilt by a call passed shuffle=True, "
               "`d.shuffle()`, or `random.shuffle(items)` on what it is built from, with no seed the epoch leaves "
               "fixed: the data under the sampler is in a new order each epoch), and for one whose loader is read in "
               "one pass (a loop that no other loop repeats, in a function that no epoch loop calls). Without a "
               "loop over epochs, a sampler whose loader is iterated inside a `while True:` of its function "
               "(training by steps) is reported when no set_epoch() call appears in the program. A "
               "DistributedSampler is torch's, or a class of that name from any module (torchft's), the name "
               "it is imported as (`import DistributedSampler as DS`), or a class of the file based on one of "
               "these, unless it defines an __iter__ that reads no epoch. Silent when every class its dataset can "
               "be (the names its function binds to it, classes of the file) defines a __getitem__ that never "
               "reads its index: each item is a fresh random draw, and the order carries no data. Silent when "
               "its loader goes (by name, or inside loaders, tuples and wrappers) into a class whose methods call "
               "set_epoch on the sampler of what it wraps (`self._dataloader.sampler.set_epoch(e)`, LAVIS's "
               "IterLoader), in the file or its folder, or into a class imported from the project's own package "
               "(a relative import, or a package that is a folder of the program) that no file read defines: a "
               "name the doctor cannot follow. tqdm, enumerate, iter, zip, itertools and a library's classes set "
               "no epoch.",
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
               "val/test/eval that feeds a loader the script uses, without drop_last=True, in a file (and "
               "folder) that combines values over the ranks "
               "(a reduce, a sum over ranks) but gathers nothing, and never tests "
               "len(...) % ... itself; silent when every loader the sampler feeds is only read batch by batch, "
               "never in one pass over the set: passed to itertools.cycle or to an endless generator of the file "
               "(`while True: for x in loader: yield x`), or to iter() whose result only next() reads; silent "
               "when every class the dataset can be (bound in the sampler's function, classes of the file) defines "
               "a __getitem__ that never reads its index: a padded index repeats no sample.",
               "05 · Rank-aware training"),
    "DDP022": ("workers-seeded-alike", "DataLoader workers seeded alike on every rank: {detail} on every rank, "
               "and no generator= or worker_init_fn, so worker k of every rank draws the same random augmentations",
               "Each DataLoader worker seeds torch and random with base_seed + worker_id, and numpy with "
               "_generate_state(base_seed, worker_id) (torch/utils/data/_utils/worker.py), so the workers of one "
               "process draw apart (numpy's old copy-per-worker bug is gone). But base_seed is drawn from the "
               "loader's generator= or, without one, from torch's default RNG, each time the loader starts its "
               "workers: every epoch, or once with persistent_workers (_BaseDataLoaderIter.__init__ in "
               "torch/utils/data/dataloader.py). After torch.manual_seed(seed) on every "
               "rank, every rank draws the same base_seed: worker k of every rank draws exactly the augmentations "
               "worker k of every other rank draws, so N ranks repeat one stream of augmentations instead of "
               "drawing N. Nothing fails and nothing warns.",
               "DataLoader(..., generator=torch.Generator().manual_seed(seed + 1000 * rank)): base_seed then "
               "differs per rank and still per epoch, and the initial weights keep torch.manual_seed(seed). "
               "(With num_workers=0 the main process draws, alike on every rank too, but generator= does not "
               "reach it: reseed per rank once the model is built; the rule stays silent there.) "
               "Conservative: only a training loader with num_workers other than 0 (a number or a setting), "
               "beside torch.manual_seed of a "
               "value that is visibly the same on every rank (a number, args.seed), in a DDP file with random "
               "augmentation in sight (a torchvision Random* transform here or in the folder, or a random draw in "
               "a __getitem__ of the file); silent where any seed in the file mixes in the rank or goes through a "
               "seeding helper the doctor cannot read (which may add the rank), where the seed is "
               "set in the function that spawns the ranks (a spawned rank starts from torch's own random seed), "
               "or where the loader gets generator=, worker_init_fn or **kwargs, or is built by one process only "
               "(the single-process side of a \"distributed or not\" test, such as the `else` of `if "
               "args.use_ddp:`, or inside a rank test).",
               "12 · Real data under DDP"),
}


def distributed_samplers(m):
    return m.named_calls(*sampler_classes(m))


def sampler_classes(m):
    """The names a file makes DistributedSamplers by: DistributedSampler (torch's, or a class of that name from
    any module: torchft's subclasses torch's), the names it imports it as (`from torch.utils.data.distributed
    import DistributedSampler as DDP_sampler`), and the classes of the file whose base is one of these, unless
    such a class defines an __iter__ that never reads an epoch (its order is then its own). Found once per file."""
    names = m.__dict__.get("_sampler_classes")
    if names is None:
        names = ["DistributedSampler"]
        for node in m.of_type(ast.ImportFrom):
            names += [a.asname for a in node.names if a.name == "DistributedSampler" and a.asname]
        classes = m.of_type(ast.ClassDef)
        for _ in range(3):  # a subclass of a subclass, in any order of the file
            more = [c.name for c in classes if c.name not in names and
                    any((dotted(b).rpartition(".")[2]) in names for b in c.bases) and not own_order(c)]
            if not more:
                break
            names += more
        m.__dict__["_sampler_classes"] = names
    return names


EPOCH_WORD = re.compile("epoch", re.I)


def own_order(cls):
    """Whether a sampler class defines an __iter__ that reads no epoch (`self.epoch`, `epoch`)."""
    return any(isinstance(f, ast.FunctionDef) and f.name == "__iter__" and not text_mentions(f, EPOCH_WORD)
               for f in cls.body)


def rule_sampler_without_set_epoch(m):
    """DDP002: a shuffling DistributedSampler, an epoch loop, and no set_epoch for it: none anywhere, or only
    on other samplers that the file names (`val_sampler.set_epoch(epoch)` while the training sampler is never told).

    Error: a wrong result: every epoch visits the data in the same order.
    """
    samplers = [c for c in distributed_samplers(m) if not is_const(keyword(c, "shuffle"), False) and
                not order_free(m, c)]  # (items that ignore their index: no order to repeat)
    escaped = {c for c in samplers if escapes(m, c)}
    if escaped and not program_sets_epoch(m) and program_repeats(m):
        for call in escaped:  # judged by the whole program: no set_epoch in it reaches this sampler (nor one
            # made by a function for evaluation: validation_dataloader(), build_eval_dataloader())
            data = call.args[0] if call.args else keyword(call, "dataset")
            if not (data is not None and text_mentions(data, EVALISH)) and not EVAL_FUNCTION.search(
                    m.scope(call).name) and not seeded_by_epoch(m, call) and not shuffled_each_epoch(m, call) and \
                    not handed_to_epoch_setter(m, call):
                yield call, "DDP002", ESCAPED
    if all(runs_once(loop, m) for loop in m.epoch_loops()):
        if not program_sets_epoch(m):  # training by steps: `while True: for batch in loader:`
            for call in samplers:
                if call not in escaped and read_by_steps(m, call) and not handed_to_epoch_setter(m, call):
                    yield call, "DDP002", BY_STEPS
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
        looping = {m.scope(loop) for loop in m.epoch_loops() if not runs_once(loop, m)}
    for call in samplers:
        if call in escaped:
            continue  # judged above, by the whole program
        data = call.args[0] if call.args else keyword(call, "dataset")
        if told is not None and (call in told or m.scope(call) not in looping):
            continue  # told, or made where no epoch loop runs (a sampler for one batch)
        if not (data is not None and text_mentions(data, EVALISH)) and not seeded_by_epoch(m, call) \
                and not one_pass(m, call) and not shuffled_each_epoch(m, call) and not handed_to_epoch_setter(m, call):
            yield call, "DDP002", ""


def order_free(m, call):
    """Whether a sampler's order carries no data: its dataset is a name that its function binds only to
    instances of classes of this file (`data = RandomCropDataset(...)`, tuples unpacked, other such names
    followed: `val_data = train_data`), and each such class defines a __getitem__ that never reads its index
    (each item a fresh random draw). A class the doctor cannot see, an inherited __getitem__, an index read in
    any way (passed on included), or any other binding (a parameter, a subscript, a call of a function) keeps
    the order meaningful."""
    data = call.args[0] if call.args else keyword(call, "dataset")
    if type(data) is not ast.Name:
        return False
    fn = m.scope(call)
    bound = {}
    for name, value in m.assignments(fn):
        bound.setdefault(name, []).append(value)
    todo, seen, classes = [data.id], set(), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in bound:
            return False  # a parameter, a global, a name bound by `for` or `with`: not seen
        for value in bound[name]:
            if type(value) is ast.Name:
                todo.append(value.id)
            elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                classes.add(value.func.id)
            else:
                return False
    if not classes:
        return False
    defined = {}
    for cls in m.of_type(ast.ClassDef):
        if cls.name in classes:
            defined.setdefault(cls.name, []).append(cls)
    return classes <= defined.keys() and all(ignores_index(c) for name in classes for c in defined[name])


def ignores_index(cls):
    """Whether a class defines __getitem__(self, index) whose body never reads index (nor calls locals/vars)."""
    gets = [f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "__getitem__"]
    if len(gets) != 1 or len(gets[0].args.args) != 2 or gets[0].args.vararg or gets[0].args.kwarg:
        return False
    index = gets[0].args.args[1].arg
    return not any(type(n) is ast.Name and (n.id == index and isinstance(n.ctx, ast.Load) or n.id in ("locals", "vars"))
                   for stmt in gets[0].body for n in walk(stmt))


EVALISH = re.compile(r"val|test|eval", re.I)
EVAL_FUNCTION = re.compile(r"(?:^|_)(?:val|test|eval)|[a-z](?:Val|Test|Eval)")  # build_eval_loader, getValLoader
ESCAPED = (" (it leaves the function that builds it, and no set_epoch() call appears anywhere in the program: "
           "every epoch has epoch 0's order)")
HOLDERS = (ast.IfExp, ast.Tuple, ast.List, ast.Dict, ast.Starred, ast.keyword, ast.Call)
LOADERISH = re.compile(r"loader|sampler", re.I)


def escapes(m, call):
    """Whether a sampler leaves the function that builds it, where the doctor cannot follow it to its epoch loop:
    returned (alone, or inside the DataLoader, BatchSampler, wrapper, tuple, list or dict that holds it, directly
    or through the names the function binds them to) or stored on an attribute (`self.sampler = ...`,
    `args.loader = DataLoader(..., sampler=...)`). Not a sampler of the module's top level (a script's own
    loop reads it), nor one only iterated, measured or passed elsewhere inside its function."""
    fn = m.scope(call)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    loads = None  # name -> its loads in the function (name_loads), when a name is to be followed
    todo, seen = [call], set()
    while todo:
        node = todo.pop()
        up = m.parent.get(node)
        while isinstance(up, HOLDERS) and holds(m, up, node):
            node, up = up, m.parent.get(up)
        if isinstance(up, (ast.Return, ast.Yield)):
            return True
        if isinstance(up, (ast.Assign, ast.AnnAssign)) and node is up.value:
            for target in up.targets if isinstance(up, ast.Assign) else [up.target]:
                if isinstance(target, ast.Attribute):
                    return True
                if isinstance(target, ast.Name) and target.id not in seen:
                    seen.add(target.id)
                    if loads is None:
                        loads = name_loads(m, fn)
                    todo += loads.get(target.id, [])
    return False


def handed_to_epoch_setter(m, call):
    """Whether a sampler goes, by the names its function binds it to and the loaders, tuples and wrappers that
    hold it (as escapes() follows it), into a call of a wrapper class that sets its epoch (epoch_setters: a class
    whose methods call `<loader>.sampler.set_epoch(...)` on what it wraps, as LAVIS's IterLoader does at the end
    of each pass), or of a class of the project's own package that the doctor cannot read (own_unread_classes):
    a name it cannot follow, where it stays silent. Not tqdm, enumerate, iter, zip, itertools, nor a class of a
    library outside the project: they set no epoch."""
    wrappers = epoch_setters(m) | own_unread_classes(m)
    if not wrappers:
        return False
    fn = m.scope(call)
    loads = None
    todo, seen = [call], set()
    while todo:
        node = todo.pop()
        up = m.parent.get(node)
        while True:
            holder = m.parent.get(up) if isinstance(up, ast.keyword) else up
            if isinstance(holder, ast.Call) and node is not holder.func and last_name(holder) in wrappers:
                return True
            if not (isinstance(up, HOLDERS) and holds(m, up, node)):
                break
            node, up = up, m.parent.get(up)
        if isinstance(up, (ast.Assign, ast.AnnAssign)) and node is up.value:
            for target in up.targets if isinstance(up, ast.Assign) else [up.target]:
                if isinstance(target, ast.Name) and target.id not in seen:
                    seen.add(target.id)
                    if loads is None:
                        loads = name_loads(m, fn if fn is not None else m.tree)
                    todo += loads.get(target.id, [])
    return False


def epoch_setters(m):
    """The classes of the program (this file's, and by their text the folder's: FolderFacts.epoch_setters) whose
    methods call set_epoch on the sampler of the loader they wrap (`self._dataloader.sampler.set_epoch(e)`,
    `loader.batch_sampler.set_epoch(e)`). Found once per file."""
    found = m.__dict__.get("_epoch_setters")
    if found is None:
        found = set(getattr(m.folder_call_names, "epoch_setters", ()))
        for c in m.named_calls("set_epoch"):
            if isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Attribute) and \
                    c.func.value.attr in ("sampler", "batch_sampler"):
                found.update(a.name for a in m.ancestors(c) if isinstance(a, ast.ClassDef))
        m.__dict__["_epoch_setters"] = found
    return found


def own_unread_classes(m):
    """The names a file imports from the project's own package (a relative import, or a top-level package or
    module that is a folder or file of the program: FolderFacts.modules) that are classes by their name (CapWords)
    and that no file the doctor reads defines: code it cannot follow. Found once per file."""
    found = m.__dict__.get("_own_unread_classes")
    if found is None:
        ours = getattr(m.folder_call_names, "modules", frozenset())
        defined = set(getattr(m.folder_call_names, "classes", ())) | {c.name for c in m.of_type(ast.ClassDef)}
        found = set()
        for node in m.of_type(ast.ImportFrom):
            if node.level or (node.module or "").split(".")[0] in ours:
                found.update(a.asname or a.name for a in node.names
                             if a.name[:1].isupper() and not a.name.isupper() and a.name not in defined)
        m.__dict__["_own_unread_classes"] = found
    return found


BY_STEPS = (" (its loader is read again and again by `while True:`, and no set_epoch() call appears anywhere in "
            "the program: every pass has the first pass's order)")


def read_by_steps(m, call):
    """Whether a sampler that its function binds to a name goes, by sampler= (or an argument of a loader class),
    into a loader bound to a name that a `for` loop of the same function iterates inside a `while True:` loop
    (training by steps): each pass of the `while` starts the loader again, in the same order."""
    fn, bound = m.scope(call), m.parent.get(call)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(bound, ast.Assign) or \
            len(bound.targets) != 1 or type(bound.targets[0]) is not ast.Name:
        return False
    loads = name_loads(m, fn)
    loaders = set()
    for use in loads.get(bound.targets[0].id, []):
        up = m.parent.get(use)
        loader = m.parent.get(up) if isinstance(up, ast.keyword) else up
        where = m.parent.get(loader)
        if isinstance(loader, ast.Call) and holds(m, up, use) and isinstance(where, ast.Assign) and \
                len(where.targets) == 1 and type(where.targets[0]) is ast.Name:
            loaders.add(where.targets[0].id)
    for name in loaders:
        for use in loads.get(name, []):
            loop = next((a for a in m.ancestors(use) if isinstance(a, LOOPS) or a is fn), fn)
            if isinstance(loop, (ast.For, ast.AsyncFor)) and any(use is n for n in walk(loop.iter)) and any(
                    isinstance(a, ast.While) and (is_const(a.test, True) or is_const(a.test, 1))
                    for a in takewhile(lambda a: a is not fn, m.ancestors(loop))):
                return True
    return False


def name_loads(m, fn):
    """name -> the nodes that read it in a function (nested ones included), read once per function."""
    cache = m.__dict__.setdefault("_name_loads", {})
    if fn not in cache:
        loads = cache[fn] = {}
        for n in walk(fn):
            if type(n) is ast.Name and isinstance(n.ctx, ast.Load):
                loads.setdefault(n.id, []).append(n)
    return cache[fn]


def holds(m, up, node):
    """Whether a node's parent holds the node's object in what it makes: the branches of a conditional
    expression, an element of a tuple/list/dict, sampler= or batch_sampler= of a call, or an argument of a
    loader or sampler class (`DataLoader(dataset, sampler)`, `PrefetchLoader(loader)`, `BatchSampler(sampler,
    ...)`); not `len(loader)`, `iter(loader)`, nor the test of a conditional expression."""
    kind = type(up)
    if kind is ast.IfExp:
        return node is not up.test
    if kind is ast.Dict:
        return any(node is v for v in up.values)
    if kind is ast.keyword:
        return up.arg in ("sampler", "batch_sampler") or bool(LOADERISH.search(last_name(m.parent.get(up)) or ""))
    if kind is ast.Call:
        return node is not up.func and bool(LOADERISH.search(last_name(up) or "")) or isinstance(node, ast.keyword)
    return True


def program_sets_epoch(m):
    """Whether any set_epoch( call appears in the program: this file, or any file of its folder (read once per
    folder, from the text, comments and `def set_epoch(` left out)."""
    return "set_epoch" in m.call_names or "set_epoch" in getattr(m.folder_call_names, "built", ())


def program_repeats(m):
    """Whether the program has a loop that may pass over a loader more than once: a loop over epochs of more
    than one (here, or in any file of its folder), or a `while True:` (training by steps)."""
    if any(not runs_once(loop, m) for loop in m.epoch_loops()) or getattr(m.folder_call_names, "repeats", False):
        return True
    return any(is_const(w.test, True) or is_const(w.test, 1) for w in m.of_type(ast.While))


LOOPS = (ast.For, ast.AsyncFor, ast.While)


def one_pass(m, call):
    """Whether a sampler's loader is read once: the function binds the sampler to a name that only the
    sampler= of a DataLoader bound to a name reads, that loader is only iterated (`for batch in loader`,
    `tqdm(loader)`) or measured (len), by a loop in no other loop that reads the same loader again (a loop around
    the loader's making, `for task in tasks:`, makes a new one), with no epoch loop around the sampler nor around
    a call of the function (`def predict(): ... for batch in loader` called once per checkpoint): no second pass
    whose order set_epoch could change."""
    fn, node = m.scope(call), m.parent.get(call)
    while isinstance(node, ast.IfExp):  # `SequentialSampler(d) if local_rank == -1 else DistributedSampler(d)`
        node = m.parent.get(node)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(node, ast.Assign) or \
            len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return False
    names = {n for n in walk(fn) if isinstance(n, ast.Name)}
    if any(isinstance(a, LOOPS) and m.is_epoch_loop(a) for a in takewhile(lambda a: a is not fn, m.ancestors(call))):
        return False  # a new sampler each epoch: DDP002 reads its seed
    loaders, bindings = set(), {}
    for use in (n for n in names if n.id == node.targets[0].id and isinstance(n.ctx, ast.Load)):
        word, loader = m.parent.get(use), m.parent.get(m.parent.get(use))
        bound = m.parent.get(loader)
        if not (isinstance(word, ast.keyword) and word.arg == "sampler" and isinstance(loader, ast.Call) and
                last_name(loader) == "DataLoader" and isinstance(bound, ast.Assign) and len(bound.targets) == 1 and
                isinstance(bound.targets[0], ast.Name)):
            return False
        loaders.add(bound.targets[0].id)
        bindings[bound.targets[0].id] = set(takewhile(lambda a: a is not fn, m.ancestors(bound)))
    for use in (n for n in names if n.id in loaders and isinstance(n.ctx, ast.Load)):
        above = m.parent.get(use)
        if isinstance(above, ast.Call) and last_name(above) == "len":
            continue
        loop = next((a for a in m.ancestors(use) if isinstance(a, LOOPS) or a is fn), fn)
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or not any(use is n for n in walk(loop.iter)) or any(
                isinstance(a, LOOPS) and a not in bindings[use.id]
                for a in takewhile(lambda a: a is not fn, m.ancestors(loop))):
            return False  # a loop that reads the same loader again (a loop around its making makes a new one)
    return bool(loaders) and not any(isinstance(a, LOOPS) and m.is_epoch_loop(a)
                                     for c in m.named_calls(fn.name) for a in m.ancestors(c))


def seeded_by_epoch(m, call):
    """Whether a DistributedSampler built inside an epoch loop takes a seed= that depends on the loop's variable
    (`seed=base + epoch`, or a name its function assigns from it): a new sampler each epoch, with a new order
    each epoch, which set_epoch would not change. Not a constant seed (the same order every epoch), nor one that
    depends only on an inner loop's variable."""
    seed = keyword(call, "seed")
    epochs = names_of_epochs(m, call) if seed is not None else set()
    if not epochs:
        return False
    names = {n.id for n in walk(seed) if isinstance(n, ast.Name)}
    return bool(names & epochs) or any(
        name in names and any(isinstance(n, ast.Name) and n.id in epochs for n in walk(value))
        for name, value in m.assignments(m.scope(call)))


def shuffled_each_epoch(m, call):
    """Whether a DistributedSampler built inside an epoch loop reads a dataset that the same pass of the loop
    shuffles: bound there to a call passed shuffle=True (`get_dataset(..., shuffle=True)`, a rebuild in a new
    order), or to `d.shuffle()`, or shuffled in place (`random.shuffle(d)`, `np.random.shuffle(d)`,
    `rng.shuffle(d)`), itself or a name it is built from there (`random.shuffle(items)` ... `Dataset(items)`).
    The sampler's own permutation repeats (epoch 0's seed), but the data under it is in a new order each epoch,
    and set_epoch would change nothing that matters. Not a rebuild without a shuffle (the same order each epoch),
    nor a shuffle with a seed that the epoch does not change (seed=0, seed=args.seed), nor a loop that reseeds
    (`random.seed(0)`, `torch.manual_seed(args.seed)`, `random.Random(0).shuffle(d)`) with a value that the epoch
    does not change."""
    fn = m.scope(call)
    loop = next((a for a in takewhile(lambda a: a is not fn, m.ancestors(call))
                 if isinstance(a, (ast.For, ast.AsyncFor)) and m.is_epoch_loop(a)), None)
    data = call.args[0] if call.args else keyword(call, "dataset")
    if loop is None or data is None:
        return False
    epochs = names_of_epochs(m, call)  # (the same for every call whose innermost epoch loop is this one)

    def by_epoch(node):  # a seed that the epoch changes, or no seed
        return node is None or any(isinstance(n, ast.Name) and n.id in epochs for n in walk(node))

    cache = m.__dict__.setdefault("_epoch_shuffles", {})  # loop -> what it binds and shuffles (read once a loop)
    if loop not in cache:
        bound, shuffled = {}, set()  # name -> the values the loop binds it to; the names shuffled in place
        for node in walk(loop):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if dotted(target):
                        bound.setdefault(dotted(target), []).append(node.value)
            elif isinstance(node, ast.Call) and last_name(node) in SEEDERS and (node.args or node.keywords) and \
                    not by_epoch(node):
                bound = None  # reseeded to the same value each epoch: the same shuffle again
                break
            if isinstance(node, ast.Call) and last_name(node) == "shuffle" and node.args and \
                    not isinstance(node.args[0], ast.Constant) and by_epoch(keyword(node, "seed")):
                shuffled.add(dotted(node.args[0]))  # random.shuffle(items), rng.shuffle(items)
        cache[loop] = bound, shuffled
    bound, shuffled = cache[loop]
    if bound is None:
        return False

    def shuffling(value):  # get_dataset(..., shuffle=True), d.shuffle(), d.shuffle(seed=epoch)
        if not isinstance(value, ast.Call):
            return False
        if is_const(keyword(value, "shuffle"), True):
            return by_epoch(keyword(value, "seed"))
        return last_name(value) == "shuffle" and isinstance(value.func, ast.Attribute) and not any(
            isinstance(a, ast.Constant) for a in value.args) and by_epoch(keyword(value, "seed"))

    todo, seen = [data], set()
    while todo and len(seen) < 20:
        value = todo.pop()
        if shuffling(value):
            return True
        name = dotted(value)
        if name:
            if name in seen:
                continue
            seen.add(name)
            if name in shuffled:
                return True
            for value in bound.get(name, []):
                todo += [n for n in walk(value) if isinstance(n, (ast.Name, ast.Attribute, ast.Call))]
    return False


SEEDERS = {"seed", "manual_seed", "seed_everything", "set_seed", "Random", "RandomState", "default_rng"}


def names_of_epochs(m, call):
    """The names that the epoch loops around a call bind (`for epoch in range(n)`: epoch)."""
    return {n.id for loop in m.ancestors(call) if isinstance(loop, (ast.For, ast.AsyncFor)) and m.is_epoch_loop(loop)
            for n in walk(loop.target) if isinstance(n, ast.Name)}


def runs_once(loop, m=None):
    """`for epoch in range(1)` (or range(0, 1)): a loop of one epoch, written as a number, or as a name that the
    file binds once, to 1 (`max_epoch = 1` ... `range(max_epoch)`)."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and last_name(it) == "range" and it.args and not it.keywords):
        return False
    if len(it.args) == 1:
        count = it.args[0]
        if isinstance(count, ast.Name) and m is not None:  # (most names are never set to 0 or 1: no bindings read)
            count = bound_once(m, count.id) if count.id in names_set_to_zero_or_one(m) else None
        return is_const(count, 1) or is_const(count, 0)
    bounds = [a.value for a in it.args if isinstance(a, ast.Constant) and type(a.value) is int]
    return len(it.args) == len(bounds) == 2 and bounds[1] - bounds[0] <= 1


def names_set_to_zero_or_one(m):
    """The names that some plain assignment of the file sets to 0 or 1 (`max_epoch = 1`): the only names whose
    bound_once can be 0 or 1. Read from the assignments, once per file."""
    if not hasattr(m, "_zero_or_one"):
        m._zero_or_one = {t.id for a in m.of_type(ast.Assign) if is_const(a.value, 1) or is_const(a.value, 0)
                          for t in a.targets if isinstance(t, ast.Name)}
    return m._zero_or_one


def bound_once(m, name):
    """The value of a name that the file binds exactly once, by a plain assignment (not a loop, a parameter,
    an import, `+=`, `global` in a function that rebinds it); None otherwise."""
    if not hasattr(m, "_bindings"):
        m._bindings = {}
        for node in m.of_type(ast.Name):
            if isinstance(node.ctx, ast.Store):
                parent = m.parent.get(node)
                value = parent.value if isinstance(parent, ast.Assign) and node in parent.targets else None
                m._bindings.setdefault(node.id, []).append(value)
        for node in m.of_type(ast.arg):
            m._bindings.setdefault(node.arg, []).append(None)
        for node in m.of_type(ast.alias):
            m._bindings.setdefault((node.asname or node.name).partition(".")[0], []).append(None)
    values = m._bindings.get(name, [])
    return values[0] if len(values) == 1 else None


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

    Advice: wrong only when the set's size does not divide by the world size, two values the code does not show.
    """
    evalish = re.compile(r"val|test|eval|valid", re.I)
    for call in distributed_samplers(m):
        data = call.args[0] if call.args else keyword(call, "dataset")
        if data is None or is_const(keyword(call, "drop_last"), True) or order_free(m, call):
            continue  # (order_free: a padded index repeats no sample, each item being drawn afresh)
        sites = [call] if text_mentions(data, evalish) else helper_calls_on(m, call, data, evalish)
        sites = [site for site in sites if feeds_used_loader(m, site) and
                 not (site is call and streamed_only(m, call))]  # a stream of batches makes no full pass
        if not sites:
            continue
        if any("gather" in name for name in m.call_names | m.folder_call_names):
            continue  # the file, or another file of its folder, gathers results: it may count each index once
        if checks_divisibility(m):
            continue  # the file tests len(dataset) % world itself: it warns, pads or falls back knowingly
        if not any(COMBINES.search(name) for name in m.call_names | m.folder_call_names):
            continue  # nothing is combined over the ranks: each rank's metric is its own shard's, not a padded sum
        yield from ((site, "DDP018", "") for site in sites)


def helper_calls_on(m, call, data, pattern):
    """The calls of a helper (`def get_sampler(dataset): return DistributedSampler(dataset)`) that pass it, for the
    parameter the sampler gets, a dataset whose name matches pattern (`get_sampler(test_dataset)`): the sampler
    each such call builds is over that set."""
    fn = m.scope(call)
    if not (isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(data, ast.Name)):
        return []
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    if data.id not in params or any(name == data.id for name, _ in m.assignments(fn)):
        return []
    found = []
    for site in m.named_calls(fn.name):
        passed = passed_as(site, params, data.id)
        if passed is not None and text_mentions(passed, pattern) and used(m, site):
            found.append(site)
    return found


def used(m, call):
    """Whether what a call returns is used: passed on directly, or bound to a name that some line of its function
    reads other than in a comparison (`if val_loader is not None: pass` evaluates nothing)."""
    parent = m.parent.get(call)
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1):
        return True
    name = dotted(parent.targets[0])
    return any(dotted(n) == name and isinstance(getattr(n, "ctx", None), ast.Load) and
               not isinstance(m.parent.get(n), ast.Compare) for n in m.scope_nodes(m.scope(call))
               if isinstance(n, (ast.Name, ast.Attribute)))


def feeds_used_loader(m, call):
    """Whether a sampler (or what a helper call returns) reaches a loader that something uses: bound to a name,
    it must be read, and a DataLoader of its function given that name must be used itself (`_test_loader =
    DataLoader(test_set, sampler=test_sampler)`, never iterated, evaluates nothing)."""
    if not used_within(m, call):
        return False
    parent = m.parent.get(call)
    if isinstance(parent, ast.keyword):
        parent = m.parent.get(parent)
    if isinstance(parent, ast.Call) and last_name(parent) == "DataLoader":
        return used_within(m, parent)  # DataLoader(val_set, sampler=DistributedSampler(val_set))
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1):
        return True
    name = dotted(parent.targets[0])
    loaders = [c for c in m.named_calls("DataLoader") if m.scope(c) == m.scope(call) and
               any(dotted(a) == name for a in [*c.args, *(k.value for k in c.keywords)])]
    return not loaders or any(used_within(m, c) for c in loaders)


def used_within(m, call):
    """used(), counting reads in the functions nested in the call's function too (a `def validate():` that
    iterates the loader the enclosing function built)."""
    parent = m.parent.get(call)
    if used(m, call) or not (isinstance(parent, ast.Assign) and len(parent.targets) == 1):
        return True
    name, scope = dotted(parent.targets[0]), m.scope(call)
    return any(dotted(n) == name and isinstance(getattr(n, "ctx", None), ast.Load) and
               not isinstance(m.parent.get(n), ast.Compare) for n in walk(scope or m.tree)
               if isinstance(n, (ast.Name, ast.Attribute)))


def streamed_only(m, sampler):
    """Whether every loader a sampler feeds is read only batch by batch, never in one pass over the set: passed to
    itertools.cycle or to an endless generator of the file (`while True: for x in loader: yield x`), or given
    to iter() whose result only next() reads (`next(iter(loader))`, `it = iter(loader)` ... `next(it)`). Such
    a stream sums no metric over the whole set. Any other read (a `for` over it, a call the doctor cannot
    read, a return) keeps the finding."""
    parent = m.parent.get(sampler)
    if isinstance(parent, ast.keyword):
        parent = m.parent.get(parent)
    if isinstance(parent, ast.Call) and last_name(parent) == "DataLoader":
        loaders = [parent]
    elif isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        name = parent.targets[0].id
        loaders = [c for c in m.named_calls("DataLoader") if m.scope(c) == m.scope(sampler) and
                   any(isinstance(a, ast.Name) and a.id == name for a in [*c.args, *(k.value for k in c.keywords)])]
    else:
        return False
    return bool(loaders) and all(read_as_stream(m, loader) for loader in loaders)


def read_as_stream(m, node, depth=0):
    """Whether a loader (a call, or an expression that holds it) is read only through next(): see streamed_only."""
    parent = m.parent.get(node)
    if isinstance(parent, ast.Call) and node in parent.args:
        if parent.args.index(node) == 0 and (last_name(parent) == "next" or endless_wrapper(m, parent, 0)):
            return True  # next(it), cycle(loader), cycle_loader(loader)
        if last_name(parent) == "iter" and depth < 3:
            return read_as_stream(m, parent, depth + 1)  # iter(loader): what next() reads
        if endless_wrapper(m, parent, parent.args.index(node)):
            return True
        return False
    if not (isinstance(parent, ast.Assign) and len(parent.targets) == 1 and parent.value is node) or depth >= 3:
        return False
    name = dotted(parent.targets[0])
    if not name:
        return False
    area = m.tree if "." in name else (m.scope(parent) or m.tree)  # self.val_iter: read by other methods
    reads = [n for n in walk(area) if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) == name and
             isinstance(getattr(n, "ctx", None), ast.Load) and not isinstance(m.parent.get(n), ast.Compare)]
    return bool(reads) and all(read_as_stream(m, n, depth + 1) for n in reads)


def endless_wrapper(m, call, position):
    """Whether call hands its argument at position to an endless stream: itertools.cycle, or a generator function
    of this file that loops `while True:` (or `while 1:`) over that parameter and yields (`def cycle_loader(dl):
    while True: for x in dl: yield x`). A function the doctor cannot read is not one."""
    name = dotted(call.func)
    if name == "itertools.cycle" or (name == "cycle" and position == 0 and any(
            n.module == "itertools" and any(a.name == "cycle" and a.asname is None for a in n.names)
            for n in m.of_type(ast.ImportFrom))):
        return position == 0
    if not isinstance(call.func, ast.Name):
        return False
    for fn in m.of_type(ast.FunctionDef):
        if fn.name != call.func.id:
            continue
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        if position >= len(params):
            return False
        for loop in walk(fn):
            if isinstance(loop, ast.While) and isinstance(loop.test, ast.Constant) and loop.test.value in (True, 1):
                if any(isinstance(inner, ast.For) and isinstance(inner.iter, ast.Name) and
                       inner.iter.id == params[position] and any(isinstance(y, ast.Yield) for y in walk(inner))
                       for inner in walk(loop)):
                    return len([f for f in m.of_type(ast.FunctionDef) if f.name == fn.name]) == 1
        return False
    return False


COMBINES = re.compile(r"reduce|dist_sum|sum_over|all_sum", re.I)  # calls that combine values over the ranks


def checks_divisibility(m):
    """Whether the file computes `len(...) % ...` anywhere: a script that asks whether a set divides."""
    return any(isinstance(n.op, ast.Mod) and isinstance(n.left, ast.Call) and last_name(n.left) == "len"
               for n in m.of_type(ast.BinOp))


PER_RANK = re.compile(r"rank|gpu|device|proc|process_index|local_process|worker|node|pid", re.I)
RANDOM_TRANSFORM = re.compile(r"^(Random[A-Z]\w*|RandAugment|AutoAugment|TrivialAugmentWide|AugMix|ColorJitter|"
                              r"GaussianBlur|ElasticTransform)$")
DRAWS = {"rand", "randn", "randint", "random", "uniform", "uniform_", "choice", "shuffle", "normal", "normal_",
         "randperm", "random_sample", "beta", "bernoulli", "multinomial", "sample", "randrange", "random_"}
TORCH_SEEDS = ("torch.manual_seed", "torch.random.manual_seed")


def random_augmentation(m):
    """Whether random augmentation is in sight: a torchvision-style Random* transform called in the file or its
    folder (not RandomSampler, which orders the samples and augments nothing), or a random draw (torch.rand,
    random.random, np.random.randint, x.uniform_ ...) in a __getitem__."""
    if any(RANDOM_TRANSFORM.match(name) and not name.endswith("Sampler")
           for name in m.call_names | m.folder_call_names):
        return True
    return any(isinstance(n, ast.Call) and last_name(n) in DRAWS
               for fn in m.functions.get("__getitem__", []) for n in walk(fn))


def same_on_every_rank(m, expr, scope, depth=0):
    """Whether a seed is visibly the same on every rank: a number, a setting (args.seed, cfg["seed"], SEED = 0)
    that no line of the file makes per-rank, or arithmetic of those; a parameter, as its callers in the file
    pass it. False for anything the doctor cannot follow (a call, a name from elsewhere) or that mentions a rank."""
    if depth > 4 or text_mentions(expr, PER_RANK) or m.mentions_rank(expr):
        return False
    if isinstance(expr, ast.Constant):
        return type(expr.value) is int
    if isinstance(expr, ast.BinOp):
        return all(same_on_every_rank(m, side, scope, depth + 1) for side in (expr.left, expr.right))
    if isinstance(expr, ast.Call):  # int(args.seed), int(os.environ.get("SEED", 0)): a setting read as it is
        return last_name(expr) in ("int", "get", "getenv") and all(
            same_on_every_rank(m, a, scope, depth + 1) or isinstance(a, ast.Constant) for a in expr.args)
    if isinstance(expr, (ast.Attribute, ast.Subscript)):  # a setting, unless the file makes it per-rank
        return not any(text_mentions(v, PER_RANK) for v in settings_assigned(m).get(unparse(expr), ()))
    if isinstance(expr, ast.Name):
        for where in (scope, None):
            values = [v for name, v in m.assignments(where) if name == expr.id]
            if values:
                return all(same_on_every_rank(m, v, where, depth + 1) for v in values)
            fn = where
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
                if expr.id in params:
                    calls = m.functions.get(fn.name) and m.named_calls(fn.name)
                    passed = [passed_as(c, params, expr.id) for c in calls or []]
                    return bool(passed) and all(p is not None and same_on_every_rank(m, p, m.scope(c), depth + 1)
                                                for p, c in zip(passed, calls))
    return False


def passed_as(call, params, name):
    """The argument a call passes for parameter name (params: the function's positional parameters)."""
    index = params.index(name) - (1 if params and params[0] in ("self", "cls") else 0)
    found = keyword(call, name)
    if found is None and 0 <= index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args):
        found = call.args[index]
    return found


def settings_assigned(m):
    """What each attribute or subscript target (args.seed, cfg["seed"]) is given anywhere in the file, by an
    assignment or an augmented one (the whole `args.seed += rank`): text of the target -> values (read once)."""
    if not hasattr(m, "_settings_assigned"):
        m._settings_assigned = {}
        pairs = [(t, n.value) for n in m.of_type(ast.Assign) for t in n.targets] + [
            (n.target, n) for n in m.of_type(ast.AugAssign)]
        for target, value in pairs:
            if isinstance(target, (ast.Attribute, ast.Subscript)):
                m._settings_assigned.setdefault(unparse(target), []).append(value)
    return m._settings_assigned


def spawns(m, scope):
    """Whether a function starts the ranks itself (mp.spawn, start_processes, Process): a seed set there, before
    the start, is the parent's; spawned ranks begin with torch's own random seed. (At module level a seed runs
    again in every spawned child, which imports the main module.)"""
    return isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        isinstance(n, ast.Call) and last_name(n) in ("spawn", "start_processes", "Process")
        for n in m.scope_nodes(scope))


def rule_workers_seeded_alike(m):
    """DDP022: torch.manual_seed(same value) on every rank, and a training DataLoader with workers but no
    generator= or worker_init_fn, in a DDP file with random augmentation in sight.

    Warning: likely wrong: worker k of every rank draws the same augmentations, N ranks repeat one stream.
    """
    if not m.is_distributed or not m.calls_named.get("DataLoader"):
        return
    seeds = [c for name in m.call_names if "seed" in name.lower() for c in m.calls_named[name]]
    if any(text_mentions(a, PER_RANK) or m.mentions_rank(a) for c in seeds for a in [*c.args, *c.keywords]):
        return  # some seed in the file mixes in the rank: the ranks' streams may well differ by the time it iterates
    if any(last_name(c) not in ("manual_seed", "manual_seed_all", "seed") and last_name(c) not in m.functions
           for c in seeds):
        return  # a seeding helper from elsewhere (misc.fix_random_seeds(args.seed)): it may mix in the rank itself
    alike = [c for c in m.named_calls("manual_seed") if dotted(c.func) in TORCH_SEEDS and len(c.args) == 1 and
             not m.locally_guarded(c) and not spawns(m, m.scope(c)) and same_on_every_rank(m, c.args[0], m.scope(c))]
    if not alike or not random_augmentation(m):
        return
    evalish = re.compile(r"val|test|eval", re.I)
    for call in m.named_calls("DataLoader"):
        if any(k.arg is None or (k.arg in ("generator", "worker_init_fn") and not is_const(k.value, None))
               for k in call.keywords):
            continue  # (generator=None, worker_init_fn=None: the defaults, spelt out)
        if m.locally_guarded(call):
            continue  # one process builds it: the `else` of `if args.distributed:` (a single-process run), or rank 0
        workers = keyword(call, "num_workers")
        if workers is None or is_const(workers, 0) or (isinstance(workers, ast.Constant) and not workers.value):
            continue  # no workers: the main process draws (the same on every rank, but another fix: reseed per rank)
        scope = m.scope(call)
        target = m.parent.get(call)
        named = " ".join(unparse(t) for t in getattr(target, "targets", [])) + " " + getattr(scope, "name", "")
        if text_mentions(call, evalish) or evalish.search(named):
            continue  # an evaluation loader: no augmentation to repeat
        yield call, "DDP022", unparse(alike[0])
