"""When the ranks synchronise: collectives under a rank test, no_sync() and gradient accumulation.

Each rule_* function takes a program.Module and yields (node, code, detail); RULES holds its codes:
code -> (name, message, why, fix, lesson)."""

import ast
from itertools import chain
from operator import attrgetter

from ..program import (
    _LAYOUT,
    COLLECTIVES,
    LOG_NAMES,
    SCOPE_TYPES,
    calls_in,
    dotted,
    is_const,
    keyword,
    last_name,
    names_in,
    unparse,
    walk,
)

RULES = {
    "DDP011": ("collective-in-rank-branch", "{detail} inside a branch that only some ranks take: the others "
               "never join it (the classic hang)",
               "A collective (all_reduce, barrier, broadcast, ...) completes only when every rank calls it, "
               "and a forward pass through the DDP model starts one when the model has buffers: DDP "
               "broadcasts them from rank 0 before each forward (DDP._pre_forward, when "
               "will_sync_module_buffers(): broadcast_buffers and at least one buffer, in "
               "torch/nn/parallel/distributed.py). Under `if rank == 0:` rank 0 waits for ranks that never "
               "come, until the timeout ends the job.",
               "Call the collective on every rank, outside the branch, and keep only the rank-0 work (print, "
               "save) inside it; evaluate on rank 0 through ddp_model.module. Checked: dist collectives, "
               "functions of the same file that call them (read with the call's constant arguments: a collective "
               "under `if train:` is not reached by a call that passes train=False), such a function passed to a "
               "call (`study.optimize(objective)`, `executor.submit(f)`, `Thread(target=f)`: the callee runs it "
               "there; not print(f) nor len(f), which run nothing), and the DDP model's forward "
               "when the doctor sees "
               "buffers in the model (BatchNorm, SyncBatchNorm, a tracking InstanceNorm, register_buffer, a "
               "torchvision model with BatchNorm, in a class of the file or its folder) and broadcast_buffers is "
               "not False. A model without buffers (Embedding, LSTM, Linear, LayerNorm) runs no collective "
               "in forward; a model the doctor cannot see into (a parameter, a factory) is left alone, "
               "precision first. A function of the file that calls a parameter (`def evaluate(model, data): ... "
               "model(x)`) runs that forward when a call of the same file passes it the DDP model (by position or "
               "keyword): that call, and the forward inside the function, are read as the forward itself (here "
               "buffers must be seen in the layers that build the model: convert_sync_batchnorm() of a "
               "factory's model is not enough). Silent when the other branch calls a collective too, or reaches the "
               "same function "
               "as a callback (rank 0 runs `study.optimize(objective, n_trials=n)`, the others call "
               "`objective(None)` n times), or when a twin `if` of "
               "the same function with the complementary test calls the same one (`if not is_main(): barrier()` "
               "... `if "
               "dist.is_initialized() and is_main(): barrier()`: a part every rank of the job answers alike is "
               "set aside), and for a test that every rank of a distributed run passes alike (`local_rank >= "
               "0`, `rank != -1`, `world_size > 1`), or inside the single-process side of such a test (`if local_rank "
               "== -1:` within `if local_rank in [-1, 0]:`: no other rank to wait for). "
               "A test is about the rank only when its value comes from "
               "one: get_rank(), RANK / LOCAL_RANK / "
               "SLURM_PROCID, an mp.spawn target's first parameter, a name assigned from those, a parameter "
               "a call passes one to, a helper of the folder that returns such a comparison "
               "(is_main_process()), or `x is not None` / `if x:` on a value that a function of the file returns "
               "only under such a test (None on the other ranks); a name's spelling is not enough (`nranks`, a "
               "flag, an environment setting are the same on every rank). Silent too when the side of the test "
               "ends in `return` and calls the same collectives, in the same order, as the path the other ranks "
               "follow past the `if` (`if not is_first_worker(): barrier(); return` ... `barrier()` at the end).",
               "05 · Rank-aware training; 09 · Debugging"),
    "DDP015": ("no-sync-around-backward-only", "no_sync() around backward() only: the forward pass must be "
               "inside it too",
               "DDP decides in the forward pass whether the next backward all-reduces. A forward outside "
               "no_sync() has already armed the all-reduce, so the gradients are synchronised at every "
               "micro-step anyway: no_sync() saves nothing.",
               "with ddp_model.no_sync(): loss = loss_fn(ddp_model(x), y); loss.backward(). Checked: a "
               "no_sync() block that calls backward() but never uses the model it was taken from; silent when "
               "the step ran its forward inside its own no_sync() block of the same model, earlier in the same "
               "loop, under the same tests (`if accumulating: with model.no_sync(): out = model(x)`).",
               "07 · Performance"),
    "DDP016": ("accumulation-without-no-sync", "gradient accumulation in a DDP script without no_sync(): "
               "every micro-step all-reduces",
               "With accumulation the optimizer steps every k micro-steps, but DDP all-reduces the gradients "
               "at every backward(): k times the communication for the same result.",
               "Run the micro-steps before the last inside `with ddp_model.no_sync():` (forward and "
               "backward). Checked: an `if ... % k` that calls .step() in a loop that calls backward(), in a "
               "file that uses DDP and never no_sync().",
               "07 · Performance"),
}


def rule_collective_in_rank_branch(m):
    """DDP011: a collective, a DDP forward or a function that calls one, under `if rank == 0:`.

    Error: a hang: the other ranks never join the collective.
    """
    other_side_syncs = {}  # (if, which side) -> whether the other side calls a collective too
    ddp_models = {name.rpartition(".")[2]  # (the scopes that bind a DDP model are those of its DDP(...) calls)
                  for scope in {m.scope(c) for c in m.named_calls("DistributedDataParallel", "DDP")}
                  for name in m.ddp_names(scope)}
    candidates = m.named_calls(*COLLECTIVES, *m.collective_functions, *ddp_models)  # the calls that may sync
    forwards, passes = ddp_forwarders(m)  # forwards through a parameter that receives a DDP model, and the calls
    for call in [*candidates, *callbacks(m), *forwards, *passes]:  # (and the syncing functions passed to a call)
        scope = m.scope(call)
        name = last_name(call)
        if not isinstance(call, ast.Call):
            receiver = m.parent[call]
            receiver = m.parent[receiver] if isinstance(receiver, ast.keyword) else receiver
            what = f"{name}(), which calls a collective and is passed to {last_name(receiver)}(),"
        elif m.is_collective(call):
            what = f"dist.{name}()"
        elif isinstance(call.func, ast.Name) and name in m.collective_functions:
            if not helper_syncs(m, call):
                continue  # `evaluate(model, False)`, whose collectives run only `if train:`
            what = f"{name}(), which calls a collective,"
        elif dotted(call.func) in m.ddp_names(scope, before=call):
            if not broadcasts_buffers(m, m.ddp_names(scope)[dotted(call.func)], scope):
                continue  # a DDP forward with no buffers to broadcast is no collective
            what = f"a forward pass through the DDP model {dotted(call.func)}, which broadcasts its buffers,"
        elif call in forwards:
            what = (f"a forward pass through {dotted(call.func)}, a parameter that receives the DDP model "
                    f"{forwards[call]}, which broadcasts its buffers,")
        elif call in passes:
            what = f"{name}(), which runs a forward pass through the DDP model {passes[call]} (buffers),"
        else:
            continue
        if any(m.one_process_side(b, i) for b, i in m.enclosing_ifs(call)):
            continue  # under `if local_rank == -1:` (or the else of `if ddp:`): one process, no other rank to wait
        exit_before = m.after_rank_exit(call)
        if exit_before is not None and not any(
                isinstance(b, ast.If) and m.rank_test(b.test) for b, _ in m.enclosing_ifs(call)) and \
                not balanced_exit(m, exit_before, True):
            yield call, "DDP011", what  # after `if rank != 0: return`: the ranks that returned never call it
            continue
        for branch, in_body in m.enclosing_ifs(call):
            if isinstance(branch, ast.If) and m.rank_test(branch.test):
                loop_vars = {dotted(a.target) for a in m.ancestors(call) if isinstance(a, (ast.For, ast.AsyncFor))}
                if any(names_in(c) & (loop_vars - {""}) for c in walk(branch.test)
                       if isinstance(c, ast.Compare) and m.rank_test(c)):
                    break  # `for rank in range(world_size): if rank == me:` every rank takes it in turn
                key = (branch, in_body)
                if key not in other_side_syncs:  # read each branch's other side once
                    other = branch.orelse if in_body else branch.body
                    ddp = m.ddp_names(scope)
                    calls = [c for s in other for c in calls_in(s)]
                    other_side_syncs[key] = any(
                        m.is_collective(c) or last_name(c) in m.collective_functions or dotted(c.func) in ddp or
                        c in passes or c in forwards for c in calls), {
                        last_name(f) for c in calls for f in passed_functions(m, c)}
                syncs, passed = other_side_syncs[key]  # passed: the syncing functions it hands to a call
                if not syncs and name not in passed and not complement_syncs(m, branch, name) and \
                        not balanced_exit(m, branch, in_body):
                    yield call, "DDP011", what  # (the other ranks call one too, here or in a twin `if`: no finding)
                break


def ddp_forwarders(m):
    """The forwards through a DDP model that reaches a function of the file as an argument, and the calls that
    pass it there, found once per file: `evaluate(model, ...)`, where model is bound to DDP(...) of a module
    with buffers (broadcasts_buffers) in the caller's scope, passed by position or keyword to a function of the
    file defined once (`f(...)`, or `self.f(...)` for a method), whose body calls that parameter, `model(x)`
    (in its own body, not a nested def; not a parameter the function binds again: `model = model.module`).
    Returns ({forward call: the name passed}, {passing call: the name passed})."""
    if hasattr(m, "_ddp_forwarders"):
        return m._ddp_forwarders
    forwards, passes = {}, {}
    m._ddp_forwarders = forwards, passes
    if not m.named_calls("DistributedDataParallel", "DDP"):
        return forwards, passes
    called = {}  # function -> the names it calls as functions in its own body
    for name in m.functions.keys() & m.calls_named.keys():
        if len(m.functions[name]) != 1:
            continue
        fn = m.functions[name][0]
        params = parameters(fn)
        for call in m.calls_named[name]:
            if isinstance(call.func, ast.Name):
                offset = 0
            elif isinstance(call.func, ast.Attribute) and dotted(call.func.value) == "self" and params[:1] == ["self"]:
                offset = 1
            else:
                continue
            scope = m.scope(call)
            ddp = m.ddp_names(scope, before=call)
            if not ddp:
                continue
            given = [(params[i + offset] if i + offset < len(params) else None, a) for i, a in enumerate(call.args)]
            given += [(k.arg, k.value) for k in call.keywords]
            for param, arg in given:
                passed = dotted(arg)
                if param is None or passed not in ddp or not broadcasts_buffers(m, ddp[passed], scope) or \
                        not sees_buffer_layers(m, ddp[passed], scope):
                    continue
                if fn not in called:
                    bound = {target for target, _ in m.assignments(fn)}
                    called[fn] = {}
                    for c in walk(fn):
                        if type(c) is ast.Call and type(c.func) is ast.Name and c.func.id not in bound and \
                                m.scope(c) is fn:
                            called[fn].setdefault(c.func.id, []).append(c)
                if called[fn].get(param):
                    passes[call] = passed
                    for c in called[fn][param]:
                        forwards[c] = passed
    return forwards, passes


def sees_buffer_layers(m, wrap, scope):
    """Whether the module a DDP(...) call wraps has buffers the doctor sees in the layers or classes that build
    it, not only through convert_sync_batchnorm(model) of a model from a factory (which may have no BatchNorm):
    what a forward through a parameter asks, precision first. Read once per wrap."""
    if not hasattr(m, "_buffer_layers"):
        m._buffer_layers = {}
    if wrap not in m._buffer_layers:
        module = wrap.args[0] if wrap.args else keyword(wrap, "module")
        m._buffer_layers[wrap] = m.has_buffers(module, scope, converted=False)
    return m._buffer_layers[wrap]


def passed_functions(m, call):
    """The syncing functions of the file (m.collective_functions) that a call receives as arguments, by name: a
    callback the callee runs (`study.optimize(objective)`, `executor.submit(f)`, `map(f, xs)`,
    `Thread(target=f)`), reached where the call is, as if called there."""
    return [a for a in [*call.args, *(k.value for k in call.keywords)]
            if type(a) is ast.Name and a.id in m.collective_functions and not rebound(m, a)]


def rebound(m, name):
    """Whether a name is, where it is read, a parameter or a variable of its function (or a variable of the
    module) rather than the file's function of that name: `def run(evaluate): pool.submit(evaluate)`."""
    scope = m.scope(name)
    while isinstance(scope, (ast.Lambda, ast.ClassDef)):
        scope = m.scope(scope)
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and name.id in parameters(scope) + [
            a.arg for a in (scope.args.vararg, scope.args.kwarg) if a is not None]:
        return True
    return any(target == name.id for where in {scope, None} for target, _ in m.assignments(where))


NEVER_RUN = frozenset({*LOG_NAMES, "range", "len", "str", "int", "float", "bool", "format", "isinstance",
                       "getattr", "hasattr", "enumerate", "zip", "tensor", "zeros", "ones", "to", "item", "append"})
# the calls that run none of their arguments (print(f) prints f): not read for callbacks


def callbacks(m):
    """The syncing functions of the file passed to a call anywhere in it (passed_functions of every call), not
    to a collective or to a syncing function (that call is read itself) nor to a call that runs no argument
    (NEVER_RUN), found once per file. The arguments are first read without a Python loop (a file holds many
    calls and few callbacks), and the calls are read one by one only where some argument names a syncing
    function."""
    syncing = m.collective_functions
    if not syncing:
        return []
    if not hasattr(m, "_callbacks"):
        m._callbacks = []
        calls = [found for name, found in m.calls_named.items() if name not in NEVER_RUN and name not in syncing]
        passed = set(filter(syncing.__contains__, map(attrgetter("id"), filter(ast.Name.__instancecheck__, chain(
            chain.from_iterable(map(attrgetter("args"), chain.from_iterable(calls))),
            map(attrgetter("value"), m.of_type(ast.keyword)))))))
        if passed:
            m._callbacks = [f for c in chain.from_iterable(calls) if not m.is_collective(c)
                            for f in passed_functions(m, c)]
    return m._callbacks


def balanced_exit(m, branch, in_body):
    """Whether a side of a rank test that ends in `return` calls the same collectives, in the same order, as the
    path that the other ranks follow past the `if` to the end of the function (or its next return): `if not
    is_first_worker(): dist.barrier(); return None` ... `dist.barrier()` at the end: every rank calls barrier()
    once. Only collectives outside any inner `if`, loop or try on both paths count (else: not balanced), and
    not when a loop or a try lies between the `if` and its function."""
    side = branch.body if in_body else branch.orelse
    if not side or not isinstance(side[-1], ast.Return):
        return False
    taken = unconditional_collectives(m, side)
    if not taken:
        return False
    rest, node = [], branch
    while True:
        holder = m.parent.get(node)
        if holder is None or isinstance(holder, (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Lambda, ast.ClassDef,
                                                 ast.Module)) or node not in m.position:
            return False
        field, index = m.position[node]
        after = getattr(holder, field)[index + 1:]
        ends = next((i for i, s in enumerate(after) if isinstance(s, ast.Return)), None)
        rest += after if ends is None else after[:ends + 1]
        if ends is not None or isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef)):
            break
        node = holder
    return taken == unconditional_collectives(m, rest)


def unconditional_collectives(m, statements):
    """The names of the collectives (and of the file's functions that call one) that a list of statements calls
    on every path, in order; None if one sits in an inner `if`, loop, try or match (a count the doctor cannot
    tell). A `with` block counts as its body; a nested def or class calls nothing here."""
    found = []
    for s in statements:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(s, (ast.With, ast.AsyncWith)):
            found += [name for item in s.items for name in collective_names(m, item.context_expr)]
            inner = unconditional_collectives(m, s.body)
            if inner is None:
                return None
            found += inner
        elif any(isinstance(getattr(s, f, None), list) and getattr(s, f) and isinstance(getattr(s, f)[0], ast.stmt)
                 for f in ("body", "orelse", "finalbody", "handlers", "cases")) or isinstance(s, ast.Try):
            if collective_names(m, s):
                return None
        else:
            found += collective_names(m, s)
    return found


def collective_names(m, node):
    """The collectives, syncing functions of the file and syncing functions passed to a call (passed_functions)
    that node calls, by name, in the order of the source."""
    calls = calls_in(node)
    found = [c for c in calls if m.is_collective(c) or (
        isinstance(c.func, ast.Name) and c.func.id in m.collective_functions)]
    found += [f for c in calls for f in passed_functions(m, c)]
    return [last_name(c) for c in sorted(found, key=lambda c: (c.lineno, c.col_offset))]


HELPER_DEPTH = 64  # how deep helper_syncs follows helpers calling helpers; it recurses, so it needs a bound


def helper_syncs(m, call, busy=frozenset()):
    """Whether a call of a helper of the file that calls a collective (m.collective_functions) may reach one with
    the arguments it passes. A collective of the helper (or a call of another such helper) that sits under `if p:`
    or `if not p:`, p one of the helper's own parameters, is read with the constant the call gives p (True,
    False, None; else p's default): where the test comes out false, the call does not reach it. A call of a
    helper by a name the file defines more than once counts if any of its definitions may sync; anything the
    doctor cannot read (p passed a variable, *args, **kwargs, `obj.helper()` inside) counts as a collective."""
    name = last_name(call)
    defs = [d for d in m.functions.get(name, []) if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        return True
    if not hasattr(m, "_helper_syncs"):
        m._helper_syncs = {}  # (name, the constants the call passes) -> answer: each helper read once per shape
    key = (name, tuple((p, passed.value) for fn in defs for p in parameters(fn)
                       if (passed := passed_constant(fn, call, p)) is not None))
    if key in busy:
        return False  # the helper calling itself alike adds no collective of its own (its other calls are read)
    if len(busy) >= HELPER_DEPTH:
        return True  # a chain of helpers deeper than this is not read with its arguments: a call that may sync
    if key in m._helper_syncs:
        return m._helper_syncs[key]
    answer = reaches_collective(m, defs, call, busy | {key})
    if answer or not busy:  # (an answer cut short by a cycle is kept only from the outermost call)
        m._helper_syncs[key] = answer
    return answer


def parameters(fn):
    return [p.arg for p in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]]


def reaches_collective(m, defs, call, busy):
    """helper_syncs for the definitions of one helper, read without the memory."""
    for fn in defs:
        for site in collective_sites(m, fn):
            if not isinstance(site, ast.Call) or not (m.is_collective(site) or last_name(site) in
                                                     m.collective_functions):
                continue
            if not reached(m, fn, call, site):
                continue
            if m.is_collective(site) or not isinstance(site.func, ast.Name) or \
                    helper_syncs(m, site, busy):
                return True
    return False


def collective_sites(m, fn):
    """The calls of fn (not of functions inside it) that reaches_collective reads (a collective, or a call of
    m.collective_functions), in the order of m.scope_nodes(fn): the same walk, entering only the nodes that
    hold such a call (m.holders), so that the nodes of every helper need not be listed."""
    holding = getattr(m, "_collective_holders", None)
    if holding is None:
        holding = m._collective_holders = m.holders(
            [c for name in (m.collective_functions | COLLECTIVES) & m.calls_named.keys() for c in m.calls_named[name]
             if name in m.collective_functions or m.is_collective(c)])
    found, todo = [], [fn] if fn in holding else []
    while todo:
        node = todo.pop()
        for field, _ in _LAYOUT[type(node)]:
            value = getattr(node, field)
            for child in value if type(value) is list else [value]:
                if child in holding:
                    if type(child) is ast.Call:
                        found.append(child)
                    if type(child) not in SCOPE_TYPES:
                        todo.append(child)
    return found


def reached(m, fn, call, site):
    """Whether call (of fn) may reach site (in fn): no `if p:` / `if not p:` around site, p a parameter of fn,
    that the call's constant argument for p (or p's default) answers false."""
    for branch, in_body in m.enclosing_ifs(site):
        if not isinstance(branch, ast.If):
            continue
        test, wanted = branch.test, in_body
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, wanted = test.operand, not in_body
        if isinstance(test, ast.Name):
            value = passed_constant(fn, call, test.id)
            if value is not None and bool(value.value) != wanted:
                return False
    return True


def passed_constant(fn, call, param):
    """The constant (True, False or None, as an ast.Constant) that call gives fn's parameter param, by keyword,
    by position or by its default; None if it passes something else or the doctor cannot tell."""
    positional = [p.arg for p in [*fn.args.posonlyargs, *fn.args.args]]
    keyword_only = [p.arg for p in fn.args.kwonlyargs]
    if param not in positional and param not in keyword_only:
        return None
    if isinstance(call.func, ast.Attribute) and positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    value = keyword(call, param)
    if value is None and param in positional:
        index = positional.index(param)
        if any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
            return None
        if index < len(call.args):
            value = call.args[index]
    if value is None:
        if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        if param in positional:
            defaults = dict(zip(positional[len(positional) - len(fn.args.defaults):], fn.args.defaults))
        else:
            defaults = {p.arg: d for p, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None}
        value = defaults.get(param)
    if isinstance(value, ast.Constant) and value.value in (True, False, None) and type(value.value) in (bool,
                                                                                                   type(None)):
        return value
    return None


def broadcasts_buffers(m, wrap, scope):
    """Whether a DDP(...) call makes a model whose forward broadcasts buffers from rank 0: broadcast_buffers is
    not False, and the doctor can see buffers in the module it wraps (BatchNorm, register_buffer, a torchvision
    model with BatchNorm, a class of the file or folder that builds one). Embedding, LSTM, Linear and LayerNorm
    have none; a module the doctor cannot see into (a parameter, a factory) counts as none: silence."""
    if is_const(keyword(wrap, "broadcast_buffers"), False):
        return False
    if not hasattr(m, "_broadcasts"):
        m._broadcasts = {}  # DDP(...) call -> answer, read once per wrap (many forwards share one)
    if wrap not in m._broadcasts:
        module = wrap.args[0] if wrap.args else keyword(wrap, "module")
        m._broadcasts[wrap] = m.has_buffers(module, scope)
    return m._broadcasts[wrap]


OPPOSITE = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE,
            ast.LtE: ast.Gt, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


def complement_syncs(m, branch, name):
    """Whether the same function has a twin `if`, with another test on the same rank names, that calls the same
    collective: `if rank != 0: barrier()` ... `if rank == 0: barrier()` (rank 0 goes first), or yolov5's
    `if local_rank not in [-1, 0]: barrier()` ... `if local_rank == 0: barrier()`. The doctor cannot count
    which ranks take which (that takes values), so a pair of complementary-looking tests is taken as one.
    Complementary: `not X` / `X`, `r == 0` / `r != 0`, `r < k` / `r >= k`, each test read without the parts
    that every rank of a distributed run answers alike (rank_core: `dist.is_initialized() and is_master()` is
    `is_master()` there). Looked up in the function's
    `if`s that call name (TwinIfs), indexed once per function and name: linear in the findings."""
    scope = m.scope(branch)
    if not hasattr(m, "_twin_ifs"):
        m._twin_ifs = {}  # (function, called name) -> TwinIfs
    if (scope, name) not in m._twin_ifs:
        m._twin_ifs[(scope, name)] = TwinIfs(ifs_calling(m, scope).get(name, []), m)
    return m._twin_ifs[(scope, name)].has_twin(branch)


def ifs_calling(m, scope):
    """{last name of a function called in an `if`'s body: those `if`s, in order} for the `if` statements of one
    function (or the module), read once per function."""
    if not hasattr(m, "_ifs_calling"):
        m._ifs_calling = {}
    if scope not in m._ifs_calling:
        found = {}
        for node in m.statements(scope):
            if isinstance(node, ast.If):  # (a syncing function passed to a call counts as called: passed_functions)
                calls = [c for s in node.body for c in calls_in(s)]
                for called in {last_name(c) for c in calls} | {last_name(f) for c in calls
                                                              for f in passed_functions(m, c)}:
                    found.setdefault(called, []).append(node)
        m._ifs_calling[scope] = found
    return m._ifs_calling[scope]


class TwinIfs:
    """Some `if` statements, by what complement_syncs compares of their tests: the text, the text under a
    `not`, a comparison with one operator as (left text, operator, right text), and the rank names compared."""

    def __init__(self, ifs, m=None):
        self.m = m
        self.by_text, self.by_negated, self.by_comparison, self.texts_by_rank_names = {}, {}, {}, {}
        for node in ifs:
            test = rank_core(m, node.test)
            text = unparse(test)
            self.by_text.setdefault(text, []).append(node)
            if is_not(test):
                self.by_negated.setdefault(unparse(test.operand), []).append(node)
            comparison = one_comparison(test)
            if comparison is not None:
                self.by_comparison.setdefault(comparison, []).append(node)
            self.texts_by_rank_names.setdefault(frozenset(rank_names(test)), set()).add(text)

    def has_twin(self, branch):
        """Whether another of these `if`s has a test complementary to branch's, or another test of the same rank
        names (both read through rank_core)."""
        test = rank_core(self.m, branch.test)
        text = unparse(test)
        candidates = [self.by_negated.get(text, [])]  # `if not X:` for `if X:`
        if is_not(test):
            candidates.append(self.by_text.get(unparse(test.operand), []))  # `if X:` for `if not X:`
        comparison = one_comparison(test)
        if comparison is not None:
            left, op, right = comparison
            candidates.append(self.by_comparison.get((left, OPPOSITE.get(op), right), []))
        if any(node is not branch for found in candidates for node in found):
            return True
        tested = rank_names(test)
        return bool(tested) and bool(self.texts_by_rank_names.get(frozenset(tested), set()) - {text})


def rank_core(m, test):
    """A test without the parts of its `and` that hold on every rank of a distributed run, and of its `or` that
    hold on none (m.test_polarity: `dist.is_initialized()`, `args.distributed`, `world_size > 1`; `not ddp`):
    `dist.is_initialized() and is_master()` decides as `is_master()` does in the run where the ranks meet.
    Not a part every rank answers alike otherwise (a flag that may be False on every rank: then none of them
    calls). The test itself when nothing, or everything, is set aside."""
    if m is None or not isinstance(test, ast.BoolOp):
        return test
    aside = isinstance(test.op, ast.And)  # the polarity that changes nothing: True in an `and`, False in an `or`
    kept = [v for v in test.values if m.test_polarity(v) is not aside]
    if not kept or len(kept) == len(test.values):
        return test
    return kept[0] if len(kept) == 1 else ast.BoolOp(op=test.op, values=kept)


def is_not(test):
    return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)


def one_comparison(test):
    """(left text, operator type, right text) of a comparison with one operator, else None."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return unparse(test.left), type(test.ops[0]), unparse(test.comparators[0])
    return None


def rank_names(test):
    """The names and attributes a test compares (`local_rank`, `args.rank`, `dist.get_rank()`'s text)."""
    return {unparse(side) for n in walk(test) if isinstance(n, ast.Compare)
            for side in [n.left, *n.comparators] if not isinstance(side, (ast.Constant, ast.List, ast.Tuple,
                                                                           ast.Set, ast.UnaryOp))}


def rule_no_sync_around_backward_only(m):
    """DDP015: with model.no_sync(): ... backward() ..., and the model never used inside.

    Warning: likely wrong: no_sync() was meant to save the all-reduce and saves nothing.
    """
    forwards = []  # (with, model) of each no_sync() block that uses its model
    backward_only = []  # (with, no_sync() call, model) of each block that calls backward() and not the model
    for node in m.of_type(ast.With, ast.AsyncWith):
        for item in node.items:
            ctx = item.context_expr
            if not (isinstance(ctx, ast.Call) and last_name(ctx) == "no_sync" and isinstance(ctx.func, ast.Attribute)):
                continue
            model = dotted(ctx.func.value)
            body_calls = [c for s in node.body for c in calls_in(s)]
            if not model:
                continue
            uses_model = any(dotted(c.func) == model or dotted(c.func).startswith(model + ".") or
                             any(dotted(a) == model for a in [*c.args, *(k.value for k in c.keywords)])
                             for c in body_calls)
            if uses_model:
                forwards.append((node, model))
            elif "backward" in {last_name(c) for c in body_calls}:
                backward_only.append((node, ctx, model))
    for node, ctx, model in backward_only:
        if not any(forward_in_own_no_sync(m, f, node) for f, other in forwards if other == model):
            yield ctx, "DDP015", ""


def forward_in_own_no_sync(m, forward, backward):
    """Whether a `with model.no_sync():` block that runs the model (forward) comes, in the same function and
    loop, before the one that holds backward() alone, under tests that the backward's block also sits under
    (the same test, the same side): `if accumulating: with model.no_sync(): out = model(x)` ... `if
    accumulating: with model.no_sync(): loss.backward()`. Every step that skips the sync in the backward ran its
    forward inside no_sync() too (DDP decides in the forward whether the backward reduces)."""
    def loop(node):
        return next((a for a in m.ancestors(node) if isinstance(a, (ast.For, ast.AsyncFor, ast.While))), None)

    def conditions(node):
        return {(ast.dump(b.test), side) for b, side in m.enclosing_ifs(node)}

    return m.scope(forward) is m.scope(backward) and loop(forward) is loop(backward) and \
        (forward.lineno, forward.col_offset) < (backward.lineno, backward.col_offset) and \
        conditions(forward) <= conditions(backward)


def rule_accumulation_without_no_sync(m):
    """DDP016: `if ... % k ...: optimizer.step()` in a backward() loop of a DDP file without no_sync.

    Advice: speed: k times the communication, the same result.
    """
    if not m.uses_ddp or "no_sync" in m.call_names or any(
            n.attr == "require_backward_grad_sync" for n in m.of_type(ast.Attribute)):
        return  # no_sync() somewhere, or the switch it sets, set by hand (nanoGPT's way)
    holds_step = m.holders(c for c in m.named_calls("step") if isinstance(c.func, ast.Attribute) and not c.args)
    steps = {id(n) for n in m.of_type(ast.If)  # `if ... % k ...:` whose body calls .step() without arguments
             if any(s in holds_step for s in n.body) and any(  # (optimizer.step()); the test read only then
                 type(t) is ast.BinOp and type(t.op) is ast.Mod for t in walk(n.test))}
    if not steps:
        return  # read each loop below only where some `if` could be the finding
    for loop in m.of_type(ast.For, ast.AsyncFor, ast.While, ordered=True):  # the first such loop: one finding
        if "backward" not in {last_name(c) for s in loop.body for c in calls_in(s)}:
            continue
        for node in walk(loop):
            if id(node) in steps:
                yield node, "DDP016", ""
                return
