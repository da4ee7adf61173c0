"""The program model the rules share: small readers of expressions (rank tests, collectives, names), and
`Module`, one parsed file with its scopes, assignments, guards and collective-calling functions."""

import ast
import re

COLLECTIVES = {"all_reduce", "barrier", "broadcast", "all_gather", "all_gather_into_tensor", "all_gather_object",
               "reduce", "gather", "gather_object", "scatter", "scatter_object_list", "reduce_scatter",
               "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast_object_list",
               "monitored_barrier"}
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


# ---------------------------------------------------------------------------------------------------
# Small readers of expressions


def dotted(node):
    """'torch.distributed.get_rank' for that attribute chain, 'x' for a name, '' for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def last_name(node):
    """The last part of a call's function: 'save' for torch.save, 'DDP' for DDP."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def keyword(call, name):
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_const(node, value):
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(value)


def calls_in(node):
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)]


def names_in(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def text_mentions(node, pattern):
    """Whether a name, attribute or string constant inside node matches pattern."""
    for n in ast.walk(node):
        word = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else (
            n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else None)
        if word is not None and pattern.search(word):
            return True
    return False


RANKISH = re.compile(r"rank|is_main|main_process|is_master|master_process", re.I)


def is_global_rank_expr(node):
    """get_rank() / dist.get_rank() / int(os.environ['RANK']) / os.environ.get('RANK')."""
    if isinstance(node, ast.Call) and dotted(node.func) in ("int",) and node.args:
        return is_global_rank_expr(node.args[0])
    if isinstance(node, ast.Call) and last_name(node) == "get_rank" and not node.args:
        return True
    if isinstance(node, ast.Subscript) and dotted(node.value).endswith("environ"):
        return is_const(node.slice, "RANK")
    if isinstance(node, ast.Call) and dotted(node.func).endswith(("environ.get", "getenv")) and node.args:
        return is_const(node.args[0], "RANK")
    return False


def asks_how_launched(node):
    """`"RANK" in os.environ`: a question about the launcher, not about which rank this is."""
    return isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and \
        any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)


def is_rank_test(node, aliases=frozenset()):
    """A test that only some ranks pass: `rank == 0`, `dist.get_rank() != 0`, `is_main`, `not is_main_process()`."""
    if isinstance(node, ast.BoolOp):
        return any(is_rank_test(v, aliases) for v in node.values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return is_rank_test(node.operand, aliases)
    if isinstance(node, ast.Compare):
        if asks_how_launched(node):
            return False
        return any((text_mentions(side, RANKISH) or dotted(side) in aliases) and not isinstance(side, ast.Constant)
                   for side in [node.left, *node.comparators])
    if isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
        word = last_name(node) if isinstance(node, ast.Call) else dotted(node)
        return bool(re.search(r"is_main|main_process|is_master|master_process|is_rank_?0|rank_?zero", word, re.I))
    return False


def mentions_rank(node, aliases=frozenset()):
    """A guard in the loose sense: the test mentions a rank at all (a branch some ranks may skip), by a
    rank-like name or by a name the file assigned from a rank (aliases: self.gpu_id = LOCAL_RANK ...)."""
    if asks_how_launched(node):
        return False
    return text_mentions(node, RANKISH) or any(dotted(n) in aliases for n in ast.walk(node)
                                                 if isinstance(n, (ast.Name, ast.Attribute)))


def is_any_rank_expr(node):
    """An expression that reads a rank: get_rank(), get_node_local_rank(), RANK / LOCAL_RANK from the environment."""
    return any((isinstance(n, ast.Call) and re.search(r"get_(node_)?(local_)?rank", last_name(n))) or
               (isinstance(n, ast.Constant) and n.value in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID"))
               for n in ast.walk(node))


# ---------------------------------------------------------------------------------------------------
# One parsed module, with the light analysis the rules share


class Module:
    def __init__(self, tree):
        self.tree = tree
        self._assignments, self._bound, self._guarded = {}, {}, {}
        self.parent, self.nodes, self.scope_of, self._scope_nodes = {}, [], {}, {tree: []}
        todo = [(tree, None)]  # one walk: every node, its parent, and the function it belongs to
        while todo:
            node, scope = todo.pop()
            self.nodes.append(node)
            inner = node if isinstance(node, SCOPES) else scope
            if inner is node:
                self._scope_nodes[node] = []
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
                self.scope_of[child] = inner
                self._scope_nodes[inner or tree].append(child)
                todo.append((child, inner))
        self.functions = {}  # name -> [FunctionDef] (methods too, by their name)
        for node in self.nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(node)
        self.calls = [n for n in self.nodes if isinstance(n, ast.Call)]
        self.call_names = {last_name(c) for c in self.calls}
        self.uses_ddp = bool(self.call_names & {"DistributedDataParallel", "DDP"})
        self.joins_group = "init_process_group" in self.call_names
        self.is_distributed = self.uses_ddp or self.joins_group
        self.rank_aliases = frozenset(name for scope in [None, *self.functions_flat()]
                                      for name, value in self.assignments(scope) if is_any_rank_expr(value))
        self.unguarded_functions = self._unguarded_functions()
        self.collective_functions = self._collective_functions()

    def functions_flat(self):
        return [d for defs in self.functions.values() for d in defs]

    def mentions_rank(self, test):
        return mentions_rank(test, self.rank_aliases)

    # where a node sits
    def ancestors(self, node):
        while node in self.parent:
            node = self.parent[node]
            yield node

    def scope(self, node):
        """The function (or class) a node is in (None at module level)."""
        return self.scope_of.get(node)

    def statement(self, node):
        return node if isinstance(node, ast.stmt) else next(a for a in self.ancestors(node) if isinstance(a, ast.stmt))

    def scope_nodes(self, scope):
        """Nodes of one function (or of the module), not of the functions inside it."""
        return self._scope_nodes[scope or self.tree]

    def assignments(self, scope):
        """(target, value) of every assignment in one scope, tuples unpacked (computed once)."""
        root = scope or self.tree
        if root not in self._assignments:
            found = []
            for node in self.scope_nodes(scope):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        found.extend(pairs(target, node.value))
                elif isinstance(node, ast.AnnAssign) and node.value is not None:
                    found.append((node.target, node.value))
            self._assignments[root] = [(dotted(t), v) for t, v in found if dotted(t)]
        return self._assignments[root]

    def enclosing_ifs(self, node):
        """(if statement, True if node is in its body / False in its orelse) up to the function."""
        child = node
        for a in self.ancestors(node):
            if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                return
            if isinstance(a, (ast.If, ast.IfExp, ast.While)) and child is not a.test:
                yield a, child in (a.body if isinstance(a.body, list) else [a.body])
            child = a

    def locally_guarded(self, node):
        """Inside an `if` about the rank, or after `if <rank test>: return`, in the same function."""
        if node not in self._guarded:
            self._guarded[node] = self._locally_guarded(node)
        return self._guarded[node]

    def _locally_guarded(self, node):
        if any(self.mentions_rank(a.test) for a, _ in self.enclosing_ifs(node)):
            return True
        stmt = self.statement(node)
        for a in [stmt, *self.ancestors(stmt)]:
            if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                break
            block = self.parent.get(a)
            for field in ("body", "orelse", "finalbody"):
                siblings = getattr(block, field, None)
                if isinstance(siblings, list) and a in siblings:
                    for earlier in siblings[:siblings.index(a)]:
                        if isinstance(earlier, ast.If) and self.mentions_rank(earlier.test) and any(
                                isinstance(s, (ast.Return, ast.Continue, ast.Raise)) or
                                (isinstance(s, ast.Expr) and last_name(s.value) in ("exit", "_exit"))
                                for s in earlier.body):
                            return True
        return False

    def _unguarded_functions(self):
        """Functions that some rank-unguarded path of the file calls. A function the file never calls is
        not in the set (nothing to say about it)."""
        decorated = {name for name, defs in self.functions.items()  # @rank_zero_only and the like
                     if any(text_mentions(d, RANKISH) for f in defs for d in f.decorator_list)}
        unguarded = {a.id for c in self.calls if last_name(c) in ("spawn", "start_processes", "Process")
                     for a in [*c.args, *(k.value for k in c.keywords)]  # mp.spawn(train, ...): every rank
                     if isinstance(a, ast.Name) and a.id in self.functions} - decorated
        changed = True
        while changed:
            changed = False
            for call in self.calls:
                name = last_name(call)
                if name in self.functions and name not in unguarded | decorated and not self.locally_guarded(call):
                    scope = self.scope(call)
                    if scope is None or getattr(scope, "name", None) in unguarded:
                        unguarded.add(name)
                        changed = True
        return unguarded

    def guarded(self, node):
        if self.locally_guarded(node):
            return True
        scope = self.scope(node)
        return scope is not None and getattr(scope, "name", None) not in self.unguarded_functions

    def _collective_functions(self):
        """Functions of this file that call a collective, directly or through another such function."""
        called = {name: [c for d in defs for c in self.scope_nodes(d) if isinstance(c, ast.Call)]
                  for name, defs in self.functions.items()}
        found = {name for name, calls in called.items() if any(self.is_collective(c) for c in calls)}
        callees = {name: {last_name(c) for c in calls} for name, calls in called.items()}
        changed = True
        while changed:
            changed = False
            for name in callees:
                if name not in found and callees[name] & found:
                    found.add(name)
                    changed = True
        return found

    @staticmethod
    def is_collective(call):
        name = dotted(call.func)
        return last_name(call) in COLLECTIVES and (name.startswith(("dist.", "torch.distributed.")) or
                                                   name in COLLECTIVES)

    # what names are bound to
    def bound_to(self, scope, predicate):
        """Names (and self.attributes) assigned, in scope, from a value for which predicate holds."""
        key = (scope or self.tree, predicate.__code__)  # the rules' predicates capture nothing
        if key not in self._bound:
            self._bound[key] = {name: value for name, value in self.assignments(scope) if predicate(value)}
        return self._bound[key]

    def ddp_names(self, scope, before=None):
        """Names bound to DDP(...) in scope (with before: bound on an earlier line than that node)."""
        names = self.bound_to(scope, lambda v: isinstance(v, ast.Call) and last_name(v) in
                              ("DistributedDataParallel", "DDP"))
        return names if before is None else {n: v for n, v in names.items() if v.lineno < before.lineno}

    def epoch_loops(self):
        return [n for n in self.nodes if isinstance(n, (ast.For, ast.AsyncFor)) and is_epoch_loop(n)]


def pairs(target, value):
    """(target, value) pairs of an assignment, tuples unpacked where both sides are tuples."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) and \
            len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts):
            yield from pairs(t, v)
    else:
        yield target, value


def is_epoch_loop(loop):
    return text_mentions(loop.target, re.compile("epoch", re.I)) or (
        isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "range" and
        text_mentions(loop.iter, re.compile("epoch", re.I)))


def is_batch_loop(loop, loaders):
    it = loop.iter
    if isinstance(it, ast.Call) and last_name(it) == "enumerate" and it.args:
        it = it.args[0]
    word = dotted(it)
    return bool(word) and (word in loaders or re.search(r"loader|batches", word, re.I) is not None)


def is_log_call(call):
    name = dotted(call.func)
    if name == "print":
        return True
    return bool(re.fullmatch(r"(logging|log|logger|\w*_logger|self\.logger)\.(info|warning|debug|error|log)", name))
