"""The model and its loss: a softmax fed to CrossEntropyLoss; a model built whole on every rank before sharding.

Each rule_* function takes a program.Module and yields (node, code, detail); RULES holds its codes:
code -> (name, message, why, fix, lesson)."""

import ast

from ..program import dotted, keyword, last_name, walk

RULES = {
    "DDP019": ("softmax-into-cross-entropy", "{detail} fed into CrossEntropyLoss, which applies log_softmax itself",
               "CrossEntropyLoss takes raw logits. After a Softmax the loss can never go below "
               "log(1 + (C-1)/e) (1.46 for 10 classes) and the gradients shrink: training slows or freezes. "
               "A log_softmax before it is not a mistake: log_softmax is idempotent, so the loss and its "
               "gradients are those of the logits (silent).",
               "Return the logits from forward(); apply softmax only to report probabilities. Checked: a "
               "model whose forward() returns a softmax (never a log_softmax), or one passed straight to the "
               "loss, in a file that uses CrossEntropyLoss; a model class or nn.Sequential only when it is the "
               "model in use (built and called; a class never built is silent).",
               "01 · The single-device baseline"),
    "DDP023": ("full-model-before-shard", "{detail} is built whole on every rank, then sharded: each rank holds "
               "the whole model first",
               "fully_shard (or FSDP) cuts each parameter to this rank's rows only after the constructor has "
               "allocated and initialised all of them: for a moment every rank holds the whole model (4 bytes a "
               "parameter in fp32), and N ranks of a node hold N copies in its CPU memory. Harmless while the "
               "model fits one device, which is why this is advice; it is the step that runs out of memory for "
               "the models sharding is for.",
               "Build on the meta device, shard, then materialise and initialise the shards: "
               "`with torch.device('meta'): model = Net()`, fully_shard each block and the root, "
               "model.to_empty(device=device), then fill the shards: load a checkpoint (set_model_state_dict "
               "with broadcast_from_rank0, or DCP), or initialise them (init_weights() / reset_parameters() draw "
               "each shard from its own offset of one stream on GPUs; on a CPU mesh they repeat rows across the "
               "ranks, so there initialise one full tensor at a time and keep your rows). Silent when the "
               "file or its folder uses the meta device, to_empty, param_init_fn or init_empty_weights, and "
               "for a model that comes from elsewhere (a parameter).",
               "13 · When the model does not fit: ZeRO, FSDP2 and sharded checkpoints"),
}


SOFTMAXES = {"softmax", "Softmax"}  # log_softmax is idempotent: CE(log_softmax(z)) == CE(z), not a mistake
LOG_SOFTMAXES = {"log_softmax", "LogSoftmax"}


def returned_softmax(m, fn):
    """The softmax call that forward() returns, or None: `return self.softmax(x)`, `return F.softmax(x)`,
    `out = self.softmax(x); return out`, where self.softmax = nn.Softmax(...) in __init__."""
    cls = m.parent.get(fn)
    softmax_attrs, log_attrs = set(), set()
    if isinstance(cls, ast.ClassDef):
        for node in walk(cls):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    last_name(node.value) in LOG_SOFTMAXES:  # self.softmax = nn.LogSoftmax(dim=1)
                log_attrs |= {dotted(t) for t in node.targets}
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    last_name(node.value) in SOFTMAXES:
                softmax_attrs |= {dotted(t) for t in node.targets}
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    last_name(node.value) == "Sequential" and node.value.args and \
                    last_name(node.value.args[-1]) in SOFTMAXES:
                softmax_attrs |= {"seq:" + dotted(t) for t in node.targets}
    assigned = {}
    for node in m.statements(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value

    def softmax_of(expr, depth=0):
        if isinstance(expr, ast.Name) and expr.id in assigned and depth < 3:
            return softmax_of(assigned[expr.id], depth + 1)
        if isinstance(expr, ast.Call):
            if dotted(expr.func) in log_attrs:
                return None
            if last_name(expr) in SOFTMAXES or dotted(expr.func) in softmax_attrs or \
                    ("seq:" + dotted(expr.func)) in softmax_attrs:
                return expr
            if isinstance(expr.func, ast.Attribute) and expr.func.attr in SOFTMAXES:  # x.softmax(1)
                return expr
        return None

    returns = [n for n in m.statements(fn) if isinstance(n, ast.Return) and n.value is not None]
    found = [softmax_of(r.value) for r in returns]
    return found[0] if found and all(found) else None


WRAPPERS = {"DistributedDataParallel", "DDP", "DataParallel", "to", "cuda", "compile"}


def called_models(m, built):
    """The names (and self.attributes) bound to a module that `built` (a predicate on a call) makes, or to that
    module wrapped or moved (DDP(model), model.to(device), torch.compile(model)), and whether one of them is
    called (`model(x)`): the model whose output goes on to the loss."""
    names = set()
    for _ in range(3):  # model = Net(); model = model.to(device); model = DDP(model)
        for scope in [None, *m.functions_flat()]:
            for name, value in m.assignments(scope):
                made = isinstance(value, ast.Call) and any(
                    isinstance(n, ast.Call) and built(n) for n in walk(value))
                wrapped = isinstance(value, ast.Call) and last_name(value) in WRAPPERS and any(
                    dotted(n) in names for n in walk(value) if isinstance(n, (ast.Name, ast.Attribute)))
                if made or wrapped:
                    names.add(name)
    return any(dotted(c.func) in names for c in m.calls)


def model_in_use(m, cls):
    """A class whose forward ends in a softmax matters only where its model is built and called: a class the
    file builds, bound to a name that is called (possibly wrapped in DDP), or one that only another file of the
    folder builds (where the doctor cannot follow the instance). A class never built is silent."""
    if not m.named_calls(cls):
        return cls in getattr(m.folder_call_names, "built", ())
    return called_models(m, lambda c: last_name(c) == cls and isinstance(c.func, ast.Name))


def sequential_in_use(m, seq):
    """An nn.Sequential that ends in a softmax matters only where it is the model that is called: bound to a
    name that is called (or set as a part of a model that is, `model.head = nn.Sequential(...)`), or built in a
    class whose model is in use."""
    owner = next((a for a in m.ancestors(seq) if isinstance(a, ast.ClassDef)), None)
    if owner is not None:
        return model_in_use(m, owner.name)
    stmt = m.statement(seq)
    targets = [dotted(t) for t in getattr(stmt, "targets", [getattr(stmt, "target", None)]) if t is not None]
    if not any(targets):
        return True  # passed on directly (a factory's return, an argument): the doctor cannot follow it
    bases = {t.split(".")[0] for t in targets if t}
    return called_models(m, lambda c: c is seq) or any(
        dotted(c.func) in bases for c in m.calls)


def rule_softmax_into_cross_entropy(m):
    """DDP019: a model whose forward() returns a softmax, an nn.Sequential that ends with one, or
    cross_entropy(softmax(x), y), in a file with CrossEntropyLoss.

    Error: a wrong result: the loss cannot go below a floor and training slows or stalls.
    """
    if not ({"CrossEntropyLoss", "cross_entropy"} & m.call_names):
        return
    for defs in m.functions.values():
        for fn in defs:
            if fn.name == "forward" and isinstance(m.parent.get(fn), ast.ClassDef) and \
                    model_in_use(m, m.parent[fn].name):
                call = returned_softmax(m, fn)
                if call is not None:
                    yield call, "DDP019", "a Softmax at the end of forward() is"
    for seq in m.named_calls("Sequential"):  # nn.Sequential(..., nn.Softmax(dim=1)): the model ends in a softmax
        last = seq.args[-1] if seq.args else None
        if isinstance(last, ast.Call) and last_name(last) == "Softmax" and sequential_in_use(m, seq):
            yield last, "DDP019", "a Softmax at the end of an nn.Sequential is"
    loss_fns = set()
    for scope in [None, *[d for defs in m.functions.values() for d in defs]]:
        loss_fns |= set(m.bound_to(scope, lambda v: isinstance(v, ast.Call) and last_name(v) == "CrossEntropyLoss"))
    for call in m.named_calls("cross_entropy", *{name.rpartition(".")[2] for name in loss_fns}):
        if (last_name(call) == "cross_entropy" or dotted(call.func) in loss_fns) and call.args:
            first = call.args[0]
            if isinstance(first, ast.Call) and (last_name(first) in SOFTMAXES):
                yield first, "DDP019", "a Softmax"


SHARDERS = ("fully_shard", "FullyShardedDataParallel", "FSDP")
DEFERRED = {"to_empty", "init_empty_weights", "deferred_init", "materialize_module", "meta_init"}
MOVES = {"to", "cuda", "float", "half", "bfloat16", "train", "eval"}


def moved(value, name):
    """`model.to(device)`, `model.cuda()`: the same model, moved (model = model.to(device))."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MOVES:
        value = value.func.value
    return isinstance(value, ast.Name) and value.id == name


def built_whole(m, expr, scope):
    """The constructor call that builds expr whole, or None: `Net(...)`, `Net(...).to(device)`, a name bound to
    one in the same function (`model = Net().cuda()`), `AutoModel.from_pretrained(...)`, `timm.create_model(...)`."""
    for _ in range(4):
        if isinstance(expr, ast.Name):
            values = [v for name, v in m.assignments(scope) if name == expr.id and not moved(v, name)]
            if len(values) != 1:
                return None  # bound more than once, or not here (a parameter, a global): the doctor cannot tell
            expr = values[0]
        while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in MOVES:
            expr = expr.func.value
        if isinstance(expr, ast.Call):
            name = last_name(expr)
            if name in ("from_pretrained", "from_config", "create_model") or (
                    name[:1].isupper() and name not in SHARDERS):
                return expr
            return None
    return None


def rule_full_model_before_shard(m):
    """DDP023: fully_shard(model) / FSDP(model) of a model that the same function built whole (a constructor),
    in a file that never builds on the meta device.

    Advice: memory: only a model too large for one device fails; one that fits is merely built N times.
    """
    sharders = m.named_calls(*SHARDERS)
    if not sharders or DEFERRED & (m.call_names | m.folder_call_names):
        return
    if any(n.value == "meta" for n in m.of_type(ast.Constant)):
        return  # torch.device("meta"), device="meta": built (somewhere) shapes first
    reported = set()
    for call in sharders:
        target = call.args[0] if call.args else keyword(call, "module")
        if target is None or any(k.arg in ("param_init_fn", None) for k in call.keywords):
            continue
        built = built_whole(m, target, m.scope(call))
        if built is not None and built not in reported:
            reported.add(built)
            yield call, "DDP023", dotted(target) if isinstance(target, ast.Name) else last_name(built) + "(...)"
