"""The program model the rules share: small readers of expressions (rank tests, collectives, names), and
`Module`, one parsed file with its scopes, assignments, guards and collective-calling functions."""

import ast
import re
from collections import defaultdict
from operator import itemgetter

COLLECTIVES = {"all_reduce", "barrier", "broadcast", "all_gather", "all_gather_into_tensor", "all_gather_object",
               "reduce", "gather", "gather_object", "scatter", "scatter_object_list", "reduce_scatter",
               "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast_object_list",
               "monitored_barrier"}
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
SCOPE_TYPES = frozenset(SCOPES)
BLOCKS = frozenset({"body", "orelse", "finalbody"})  # the fields that hold lists of statements
LOOPS = frozenset({ast.For, ast.AsyncFor, ast.While})
PROCESS_STARTERS = ("spawn", "start_processes", "Process", "Pool", "ProcessPoolExecutor", "submit", "launch",
                    "elastic_launch", "apply_async", "map_async", "starmap", "remote", "Thread")  # a new process?
OUTSIDE, UNKNOWN, DISTRIBUTED = 0, 1, 2  # where a function runs: before the group forms, cannot tell, in the job
BRANCHES = frozenset({ast.If, ast.IfExp, ast.While})  # the nodes with a test, a body and an orelse
LOG_NAMES = ("print", "info", "warning", "debug", "error", "log")  # the last names is_log_call accepts
_CHILD_FIELDS = {}


def child_fields(kind):
    """The fields of a node type that may hold child nodes, in order: not those that hold names, numbers or
    constants, nor an expression's context (Load, Store) or operator (Add, Not, Eq), which are shared objects
    no rule looks up by position."""
    if kind not in _CHILD_FIELDS:
        skipped = NOT_CHILDREN | ({"value"} if kind in (ast.Constant, ast.MatchSingleton) else set()) | (
            {"names"} if kind in (ast.Global, ast.Nonlocal) else set())
        _CHILD_FIELDS[kind] = tuple(f for f in getattr(kind, "_fields", ()) if f not in skipped)
    return _CHILD_FIELDS[kind]


NOT_CHILDREN = {"ctx", "op", "ops", "id", "attr", "arg", "name", "module", "level", "kind", "type_comment",
                "conversion", "is_async", "simple", "kwd_attrs", "rest", "lineno", "tag", "asname"}
NULLABLE_LISTS = {(ast.Dict, "keys"), (ast.arguments, "kw_defaults")}  # lists that hold None (`**d`, `*, a`)


class Layout(dict):
    """node type -> ((field, whether it is a list that may hold None), ...) for its child fields, in ast's order:
    what the walks read for each node, computed once per type."""

    def __missing__(self, kind):
        self[kind] = tuple((f, (kind, f) in NULLABLE_LISTS) for f in child_fields(kind))
        return self[kind]


_LAYOUT = Layout()
for _kind in vars(ast).values():  # every node type known now, so that walks look fields up without a miss
    if isinstance(_kind, type) and issubclass(_kind, ast.AST):
        _LAYOUT[_kind]


def walk(node):
    """Every node under node, breadth first, as ast.walk gives them, without the shared context and operator
    objects (see child_fields): the same order, in about half the time, since every rule walks."""
    todo = [node]
    for node in todo:  # a list read while it grows: breadth first, without a deque
        for field, may_hold_none in _LAYOUT[type(node)]:
            value = getattr(node, field, None)
            if type(value) is list:
                todo.extend([v for v in value if v is not None] if may_hold_none else value)
            elif value is not None:
                todo.append(value)
        yield node


# ---------------------------------------------------------------------------------------------------
# Small readers of expressions


def dotted(node):
    """'torch.distributed.get_rank' for that attribute chain, 'x' for a name, '' for anything else."""
    if type(node) is ast.Name:  # the most frequent case, without the list and the join
        return node.id
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
    if type(node) is ast.Call:
        node = node.func
    kind = type(node)
    if kind is ast.Attribute:
        return node.attr
    if kind is ast.Name:
        return node.id
    return ""


def keyword(call, name):
    return next((k.value for k in call.keywords if k.arg == name), None)


def is_const(node, value):
    return isinstance(node, ast.Constant) and node.value == value and type(node.value) is type(value)


def calls_in(node):
    return [n for n in walk(node) if isinstance(n, ast.Call)]


def calls_and_names(node):
    """([the calls under node, in walk's order], {the names under node}): walk's work in one loop without a
    generator, for rules that ask both of every log line of a file."""
    calls, names = [], set()
    todo = [node]
    for n in todo:  # a list read while it grows: breadth first, as walk
        kind = type(n)
        if kind is ast.Name:
            names.add(n.id)
            continue  # (no child but its context, which walk leaves out)
        if kind is ast.Call:
            calls.append(n)
        for field, may_hold_none in _LAYOUT[kind]:
            value = getattr(n, field, None)
            if type(value) is list:
                todo += [v for v in value if v is not None] if may_hold_none else value
            elif value is not None:
                todo.append(value)
    return calls, names


def names_in(node):
    return {n.id for n in walk(node) if isinstance(n, ast.Name)}


_FOUND_IN = {}  # pattern -> {word: whether pattern.search(word) finds something}, for text_mentions


def text_mentions(node, pattern, aliases=frozenset()):
    """Whether a name, attribute or string constant inside node matches pattern, or a name or dotted
    attribute inside it is one of aliases (names a file assigned from a rank: self.gpu_id = LOCAL_RANK ...).
    Each word is searched once per pattern (_FOUND_IN): a file repeats its words (loss, epoch, rank) thousands
    of times, and a dictionary answers faster than the regular expression."""
    found_in = _FOUND_IN.get(pattern)
    if found_in is None or len(found_in) > 100_000:  # (a bound on what the words of many files keep)
        found_in = _FOUND_IN[pattern] = {}
    todo = [node]  # the nodes under node, depth first (the answer takes no order): walk's work, without a generator
    while todo:
        n = todo.pop()
        kind = type(n)
        if kind is ast.Name:
            word = n.id
            if word in aliases:
                return True
        elif kind is ast.Constant:
            word = n.value
            if type(word) is not str:
                continue
        else:
            for field, may_hold_none in _LAYOUT[kind]:
                value = getattr(n, field)
                if type(value) is list:
                    todo += [v for v in value if v is not None] if may_hold_none else value
                elif value is not None:
                    todo.append(value)
            if kind is not ast.Attribute:
                continue
            word = n.attr
            if aliases and dotted(n) in aliases:
                return True
        found = found_in.get(word)
        if found is None:
            found = found_in[word] = pattern.search(word) is not None
        if found:
            return True
    return False


LOCAL_HOSTS = ("localhost", "127.0.0.1")
LOCAL_INIT = re.compile(r"^tcp://(localhost|127\.0\.0\.1)(:|$)")
RANK_CALL = re.compile(r"^get_(node_)?(local_)?rank$")
RANK_ENV = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
            "PMI_RANK", "MV2_COMM_WORLD_RANK")
RANK_VARIABLES = frozenset({"RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID"})  # environment variables
RANKISH = re.compile(r"rank|is_main|main_process|is_master|master_process", re.I)


def is_global_rank_expr(node):
    """get_rank() / dist.get_rank() / int(os.environ['RANK']) / os.environ.get('RANK')."""
    while isinstance(node, ast.Call) and dotted(node.func) in ("int",) and node.args:  # a loop: no recursion
        node = node.args[0]
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


def is_not_distributed_value(node):
    """-1 or None: the value scripts give a rank when the run is not distributed."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return is_const(node.operand, 1)
    return isinstance(node, ast.Constant) and node.value is None


NOT_DISTRIBUTED = object()  # a rank's value in a run that is not distributed: -1 or None
RANK_SAMPLES = (0, 1, 2, 3, 7, 1000)  # ranks of a distributed run
WORLD_SAMPLES = (2, 3, 4, 8, 1000)  # world sizes of a distributed run (1: one process)
WORLDISH = re.compile(r"world_?size|get_world_size|num_processes|n_?procs", re.I)
_COMPARE = {ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
            ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
            ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
            ast.Is: lambda a, b: a == b, ast.IsNot: lambda a, b: a != b}
_FLIPPED = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}


def constant_value(node):
    """The value of a number, -1, None, or a tuple / list / set of them; NOT_DISTRIBUTED stands for -1 and None;
    AttributeError for anything else."""
    if is_not_distributed_value(node):
        return NOT_DISTRIBUTED
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return tuple(constant_value(e) for e in node.elts)
    raise AttributeError


def compared_with_constant(node):
    """(the compared expression, op type, constant value) of `x OP constant` or `constant OP x`, else None."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE):
        return None
    left, op, right = node.left, type(node.ops[0]), node.comparators[0]
    for subject, other, kind in ((left, right, op), (right, left, _FLIPPED.get(op, op))):
        if isinstance(subject, ast.Constant) or (isinstance(subject, ast.UnaryOp) and
                                                 isinstance(subject.operand, ast.Constant)):
            continue
        if kind in (ast.In, ast.NotIn) and subject is right:
            continue  # `0 in ranks`: a question about a collection
        try:
            return subject, kind, constant_value(other)
        except AttributeError:
            return None
    return None


def answers(kind, value, samples):
    """The truth of `sample OP value` for each sample; None where a comparison makes no sense (None < 0)."""
    b = tuple(-1 if v is NOT_DISTRIBUTED else v for v in value) if isinstance(value, tuple) else (
        -1 if value is NOT_DISTRIBUTED else value)
    if samples and kind in (ast.Lt, ast.LtE, ast.Gt, ast.GtE) and isinstance(b, tuple):
        return None
    compare = _COMPARE[kind]
    return [bool(compare(-1 if sample is NOT_DISTRIBUTED else sample, b)) for sample in samples]


def flag_test(test):
    """(name, True) for `if name:`, `if name == True:`, `if name is True:` (a name or attribute), (name, False)
    for `if not name:`, `if name == False:`, `if name != True:`; None for anything else."""
    positive = True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, positive = test.operand, False
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant) and \
            type(test.comparators[0].value) is bool and type(test.ops[0]) in (ast.Eq, ast.Is, ast.NotEq, ast.IsNot):
        same = type(test.ops[0]) in (ast.Eq, ast.Is)
        positive = positive == (same == test.comparators[0].value)
        test = test.left
    name = dotted(test) if isinstance(test, (ast.Name, ast.Attribute)) else ""
    return (name, positive) if name else None


def distributed_polarity(node):
    """True for a test that holds exactly when the run is distributed, whatever the rank (`rank != -1`,
    `local_rank >= 0`, `local_rank > -1`, `rank not in (-1,)`, `rank is not None`, `world_size > 1`);
    False for its negation (`local_rank == -1`, `world_size == 1`); None for anything else, a rank test
    included (`rank > 0`, `local_rank in [-1, 0]`: some ranks of a distributed run pass), and `"RANK" in
    os.environ`, whose other side may be another launcher (SLURM, mp.spawn), not one process."""
    found = compared_with_constant(node)
    if found is None:
        return None
    subject, kind, value = found
    if text_mentions(subject, WORLDISH):
        if value is NOT_DISTRIBUTED or (isinstance(value, tuple) and NOT_DISTRIBUTED in value):
            return None
        many, one = answers(kind, value, WORLD_SAMPLES), answers(kind, value, (1,))
    elif text_mentions(subject, RANKISH):
        many, one = answers(kind, value, RANK_SAMPLES), answers(kind, value, (NOT_DISTRIBUTED,))
    else:
        return None
    if many is None or one is None or len(set(many)) != 1 or many[0] == one[0]:
        return None  # some ranks pass and others do not (a rank test), or the answer does not depend on the run
    return many[0]


def asks_if_distributed(node):
    """`rank != -1`, `local_rank >= 0`, `local_rank == -1`, `rank is None`: a question every rank answers alike
    (is this a distributed run?), not which rank this is."""
    return distributed_polarity(node) is not None


def is_rank_test(node, aliases=frozenset()):
    """A test that only some ranks pass: `rank == 0`, `dist.get_rank() != 0`, `is_main`, `not is_main_process()`.
    `and`, `or` and `not` are looked through with a stack, not by recursion (a test may be nested deeply)."""
    todo = [node]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.BoolOp):
            todo.extend(node.values)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            todo.append(node.operand)
        elif is_simple_rank_test(node, aliases):
            return True
    return False


def is_simple_rank_test(node, aliases):
    """is_rank_test for a test that is not an `and`, `or` or `not`."""
    if isinstance(node, ast.Compare):
        if asks_how_launched(node) or asks_if_distributed(node):
            return False
        return any((text_mentions(side, RANKISH) or dotted(side) in aliases) and not isinstance(side, ast.Constant)
                   for side in [node.left, *node.comparators])
    if isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
        word = last_name(node) if isinstance(node, ast.Call) else dotted(node)
        return bool(re.search(r"is_main|main_process|is_master|master_process|is_rank_?0|rank_?zero", word, re.I)) or (
            not isinstance(node, ast.Call) and (word in aliases or re.search(r"(^|[._])(local_|global_)?rank$", word)
                                                is not None))  # `if not rank:`, `main = rank == 0; if main:`
    return False


def mentions_rank(node, aliases=frozenset()):
    """A guard in the loose sense: the test mentions a rank at all (a branch some ranks may skip), by a
    rank-like name or by a name the file assigned from a rank (aliases: self.gpu_id = LOCAL_RANK ...)."""
    return not asks_how_launched(node) and text_mentions(node, RANKISH, aliases)


def unparse(node):
    """The source text of an expression, as ast.unparse writes it; for an expression nested too deeply for
    ast.unparse (which recurses), the names, attributes and strings it holds, in order. A name, an attribute
    chain and a call of one without arguments (`loss.item()`, which a finding may name thousands of times) are
    written here directly, as ast.unparse would."""
    name = dotted(node)
    if name:
        return name
    if type(node) is ast.Call and not node.args and not node.keywords:
        name = dotted(node.func)
        if name:
            return name + "()"
    try:
        return ast.unparse(node)
    except RecursionError:
        words = [n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else n.value
                 for n in walk(node) if isinstance(n, (ast.Name, ast.Attribute)) or
                 (isinstance(n, ast.Constant) and isinstance(n.value, str))]
        return " ".join(words)


def is_any_rank_expr(node):
    """An expression that reads a rank: get_rank(), get_node_local_rank(), RANK / LOCAL_RANK from the environment."""
    return any((isinstance(n, ast.Call) and re.search(r"get_(node_)?(local_)?rank", last_name(n))) or
               (isinstance(n, ast.Constant) and n.value in RANK_VARIABLES)
               for n in walk(node))


DISTRIBUTED_FLAG = re.compile(r"^(is_|use_|using_)?(ddp|distributed)(_mode|_run|_training)?$", re.I)
DISTRIBUTED_CALL = re.compile(r"^(is_dist|is_distributed|is_ddp|dist_is_initialized)(_\w*)?$")


def asks_distributed_by_call(node):
    """dist.is_initialized(), dist.is_available(), is_dist_avail_and_initialized(), is_distributed(): true
    exactly in a distributed run (not torch.cuda.is_available(), nor torch.cuda.is_initialized())."""
    if not isinstance(node, ast.Call) or node.args:
        return False
    name, full = last_name(node), dotted(node.func)
    if name in ("is_initialized", "is_available"):
        return full in (name, "dist." + name, "torch.distributed." + name, "distributed." + name)
    return DISTRIBUTED_CALL.match(name) is not None


# Layers and models whose modules hold buffers, which a DDP forward broadcasts from rank 0 (DDP._pre_forward
# syncs buffers when will_sync_module_buffers(): broadcast_buffers and len(modules_buffers) > 0, in
# torch/nn/parallel/distributed.py). torchvision's models with BatchNorm: ResNet, ResNeXt, Wide ResNet, VGG
# with _bn, DenseNet, EfficientNet, MobileNet, RegNet, Inception v3, GoogLeNet, ShuffleNet, MNASNet (not
# ConvNeXt, VGG without _bn, AlexNet, SqueezeNet, ViT: no BatchNorm).
BUFFER_LAYERS = re.compile(r"^(Lazy)?BatchNorm[123]d$|^SyncBatchNorm$|^convert_sync_batchnorm$|^register_buffer$")
BN_MODELS = re.compile(r"^(resnet\d+|resnext\w+|wide_resnet\w+|vgg\d+_bn|densenet\d+|efficientnet\w*|mobilenet\w*|"
                       r"regnet_\w+|inception_v3|googlenet|shufflenet\w*|mnasnet\w*|ResNet|DenseNet|EfficientNet|"
                       r"MobileNetV[23]|RegNet|Inception3|GoogLeNet|ShuffleNetV2|MNASNet)$")
BUFFERS_TEXT = re.compile(r"BatchNorm[123]d|SyncBatchNorm|register_buffer|track_running_stats\s*=\s*True|"
                          r"\b(resnet\d+|resnext\w+|wide_resnet\w+|vgg\d+_bn|densenet\d+|efficientnet\w*|"
                          r"mobilenet\w*|regnet_\w+|inception_v3|googlenet|shufflenet\w*|mnasnet\w*)\s*\(")


def builds_buffers(call):
    """Whether a call builds a module with buffers by itself: BatchNorm, SyncBatchNorm, an InstanceNorm with
    track_running_stats=True, register_buffer, a torchvision model with BatchNorm (resnet50(), ...), or
    `models.__dict__["resnet50"]` / `resnet.__dict__[arch]` (a ResNet module's constructor table)."""
    name = last_name(call)
    if BUFFER_LAYERS.match(name) or BN_MODELS.match(name):
        return True
    if re.match(r"^(Lazy)?InstanceNorm[123]d$", name):
        return is_const(keyword(call, "track_running_stats"), True)
    return isinstance(call.func, ast.Subscript) and text_mentions(call.func, re.compile(
        r"^(resnet|resnext|wide_resnet|densenet|efficientnet|mobilenet|regnet)\w*$", re.I))


# ---------------------------------------------------------------------------------------------------
# One parsed module, with the light analysis the rules share


class Module:
    def __init__(self, tree, folder=None):
        self.folder_call_names = folder or frozenset()  # names the other files of its folder call (driver)
        self.folder_buffered_classes = getattr(folder, "buffered_classes", frozenset())  # classes with buffers
        self.tree = tree
        self._assignments, self._bound, self._guarded = {}, {}, {}
        self.parent, self._scope_nodes = {}, {}
        self.scope_of = {}  # node -> the function it is in, filled when asked (scope())
        self._loops = []  # the loops of the file (for, async for, while), in the order of the walk
        self._statements = {tree: []}  # scope -> its statements, in the order of its nodes
        self.position = {}  # statement -> (field of its parent that holds it, index there)
        self._first_exit = {}  # (block, field) -> index of the first `if <rank test>: return` there
        self._after_exit = {}  # statement -> whether it comes after one (after_first_rank_exit)
        self.by_type = {}  # node type -> its nodes, in the order of the walk
        self._index(tree)
        self.functions = {}  # name -> [FunctionDef] (methods too, by their name)
        for node in self.of_type(ast.FunctionDef, ast.AsyncFunctionDef):
            self.functions.setdefault(node.name, []).append(node)
        self.calls = self.of_type(ast.Call)
        self.calls_named = self._calls_named  # last name of the function called -> its calls (_index)
        self.call_names = set(self.calls_named)
        self.log_calls = [c for c in self.named_calls(*LOG_NAMES) if is_log_call(c)]  # print(), logger.info() ...
        self.uses_ddp = bool(self.call_names & {"DistributedDataParallel", "DDP"})
        self.joins_group = "init_process_group" in self.call_names
        self.is_distributed = self.uses_ddp or self.joins_group
        self._mentions, self._reading_rank = {}, None
        self._partial_functions = frozenset()  # set by _rank_flow: functions whose value only some ranks receive
        aliases = {name for scope in [None, *self.functions_flat()]  # not `ddp = RANK != -1`: a launch question
                   for name, value in self.assignments(scope) if self.reads_rank(value) and not (
                       isinstance(value, ast.Compare) and asks_if_distributed(value))} | self._spawned_ranks()
        aliases |= self._constructor_rank_attributes()  # self.gpu_id = gpu_id, where Trainer(..., rank) passes it
        self.rank_aliases = frozenset(aliases | {  # and names that hold a rank test: `main = rank == 0`
            name for scope in [None, *self.functions_flat()] for name, value in self.assignments(scope)
            if isinstance(value, (ast.Compare, ast.BoolOp, ast.UnaryOp)) and is_rank_test(value, aliases)})
        self._polarity = {}
        self.distributed_flags = self._distributed_flags()
        flags = self._rank_flags()  # `main = False; if rank == 0: main = True`: a rank test kept in a flag
        folder_flags = getattr(self.folder_call_names, "rank_flags", None)
        if folder_flags:  # `opt.log`, which another file of the folder sets True only under `if rank == 0:`
            parent = self.parent  # (not a function called by that name: torch.log(x))
            flags |= {dotted(n) for n in self.of_type(ast.Attribute) if n.attr in folder_flags and not (
                type(parent.get(n)) is ast.Call and parent[n].func is n)} - {""}
        if flags:
            self._rank_flow()
            self.rank_aliases |= flags
            self._rank_test_names |= flags
        self.unguarded_functions = self._unguarded_functions()
        self.collective_functions = self._collective_functions()

    def _index(self, tree):
        """One walk over the file: every node by type (self.by_type), its parent, the statements of each scope,
        where each statement sits in its block, and the loops. The walk is depth first, with a stack; a scope's
        end is its enclosing scope's list of statements on the stack, which gives that list back. The function a
        node is in is not stored here but found when a rule asks (scope()).

        This is the one loop over every node (after the parser, the doctor's largest cost), written for speed:
        one dictionary lookup per node for what its type needs (kinds), and the parents collected as two lists,
        child and parent, made into the dictionary in one call at the end (cheaper than an insertion per node)."""
        position, by_type, add_loop = self.position, self.by_type, self._loops.append
        children, parents = [], []  # children[i]'s parent is parents[i]
        add_child, add_parent = children.append, parents.append
        kinds = {}  # node type -> (add to its list in by_type, its child fields, whether a scope, a loop or a constant)
        self._strings = strings = {}  # text -> its string constants (strings()), read while the node is at hand
        self._calls_named = named = {}  # last name of the function called -> its calls ('save' for torch.save())
        todo = [tree]
        push, pop = todo.append, todo.pop
        statements = self._statements[tree]
        while todo:
            node = pop()
            kind = type(node)
            if kind is list:  # the end of a scope: back to the statements of the scope around it
                statements = node
                continue
            if kind not in kinds:
                kinds[kind] = (by_type.setdefault(kind, []).append, _LAYOUT[kind],
                               kind in SCOPE_TYPES or kind in LOOPS or kind is ast.Constant or kind is ast.Call)
            add, fields, scope_or_loop = kinds[kind]
            add(node)
            if scope_or_loop:
                if kind is ast.Constant:
                    text = node.value
                    if type(text) is str:
                        same = strings.get(text)
                        if same is None:
                            strings[text] = [node]
                        else:
                            same.append(node)
                elif kind is ast.Call:  # (last_name(node), inline: a long file has a hundred thousand calls)
                    func = node.func
                    name = type(func)
                    name = func.attr if name is ast.Attribute else func.id if name is ast.Name else ""
                    same = named.get(name)
                    if same is None:
                        named[name] = [node]
                    else:
                        same.append(node)
                elif kind in SCOPE_TYPES:
                    push(statements)  # popped after the nodes of this scope
                    statements = self._statements[node] = []
                else:
                    add_loop(node)
            for field, may_hold_none in fields:  # ast's order
                value = getattr(node, field)
                if type(value) is not list:
                    if value is not None:
                        add_child(value)
                        add_parent(node)
                        push(value)
                elif value:
                    if may_hold_none:
                        value = [v for v in value if v is not None]
                    children += value
                    parents += [node] * len(value)
                    todo += value
                    if field in BLOCKS:  # statements
                        for index, child in enumerate(value):
                            position[child] = (field, index)
                        statements += value
        self.parent.update(zip(children, parents))

    def _distributed_flags(self):
        """Names that say whether the run is distributed -> True (set when it is) or False (set when it is not):
        `ddp = int(os.environ.get("RANK", -1)) != -1`, `distributed = args.local_rank >= 0`, `single = world_size
        == 1`; every assignment of the name in the file is such a test (or True / False), one at least a test.
        And names that say it by themselves: ddp, distributed, is_distributed, use_ddp, args.distributed."""
        values = {}
        for scope in [None, *self.functions_flat()]:
            for name, value in self.assignments(scope):
                values.setdefault(name, []).append(value)
        flags = {}
        for name, found in values.items():
            polarities = set()  # of the values that are not True / False: one, not None, makes a flag
            for v in found:
                if not (isinstance(v, ast.Constant) and type(v.value) is bool):
                    polarities.add(self.test_polarity(v, {}))
                    if None in polarities or len(polarities) > 1:
                        break  # (most names: the first value is no test)
            if len(polarities) == 1 and None not in polarities:
                flags[name] = polarities.pop()
        forming = {}  # `if parallel == True: ... init_process_group(...)`: the flag says the run is distributed
        for call in self.named_calls("init_process_group"):
            for branch, in_body in self.enclosing_ifs(call):
                flag = flag_test(branch.test) if isinstance(branch, ast.If) else None
                if flag is not None and not text_mentions(branch.test, RANKISH):
                    forming.setdefault(flag[0], set()).add(in_body == flag[1])
        for name, sides in forming.items():
            if name not in flags and len(sides) == 1:
                flags[name] = sides.pop()
        return flags

    def test_polarity(self, test, flags=None, depth=0):
        """True for a test that holds exactly when the run is distributed, on every rank (`if ddp:`, `if
        args.distributed:`, `if dist.is_available() and dist.is_initialized():`, `if world_size > 1:`,
        `if local_rank != -1:`); False for one that holds exactly when it is not (`if not ddp:`); None for
        anything else (a rank test, a mixed test such as `ddp and rank == 0`). The other side of such a test
        runs in one process: `if ddp: ... else: torch.save(...)` saves once."""
        if flags is None:
            polarity = self._polarity.get(test, self)  # (self: not computed yet)
            if polarity is self:
                polarity = self._polarity[test] = self.test_polarity(test, self.distributed_flags)
            return polarity
        if depth > 20:
            return None
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.test_polarity(test.operand, flags, depth + 1)
            return None if inner is None else not inner
        if isinstance(test, ast.BoolOp):  # `a and b`, `a or b` of tests that agree
            parts = {self.test_polarity(v, flags, depth + 1) for v in test.values}
            return parts.pop() if len(parts) == 1 else None
        if isinstance(test, (ast.Name, ast.Attribute)):
            name = dotted(test)
            if name in flags:
                return flags[name]
            return True if DISTRIBUTED_FLAG.match(name.rpartition(".")[2]) else None
        if asks_distributed_by_call(test):
            return True
        flag = flag_test(test) if isinstance(test, ast.Compare) else None
        if flag is not None:  # `if parallel == True:`, `if ddp is False:`
            inner = self.test_polarity(test.left, flags, depth + 1)
            return None if inner is None else inner == flag[1]
        if isinstance(test, ast.Compare):
            return distributed_polarity(test)
        return None

    def one_process_side(self, branch, in_body):
        """Whether a side of an `if` (or a conditional expression) runs in one process only: the side a
        "distributed or not" test takes when the run is not distributed."""
        if not isinstance(branch, (ast.If, ast.IfExp)):
            return False
        polarity = self.test_polarity(branch.test)
        return polarity is not None and in_body != polarity

    def _spawned_ranks(self):
        """The first parameter of a function that mp.spawn (or start_processes) starts is the process's index,
        a rank: `def main_worker(gpu, ...)` with `if gpu == 0:`; so is a name assigned from it in that function
        (`args.gpu = gpu`)."""
        found = set()
        for call in self.named_calls("spawn", "start_processes"):
            target = call.args[0] if call.args else keyword(call, "fn")
            for fn in self.functions.get(target.id, []) if isinstance(target, ast.Name) else []:
                params = [*fn.args.posonlyargs, *fn.args.args]
                if params:
                    first = params[0].arg
                    found.add(first)
                    found.update(name for name, value in self.assignments(fn)
                                 if isinstance(value, ast.Name) and value.id == first)
        return found

    def _constructor_rank_attributes(self):
        """`self.X` assigned in a class's __init__ from one of its parameters, where every construction of the
        class that the file resolves (`Trainer(train_ds, test_ds, rank)`, by position or keyword) passes a rank
        value (is_rank_value: mp.spawn's index, get_rank() ...): a rank inside the class's methods. Not when the
        file builds the class nowhere, when a construction passes *args or **kwargs, when a file of the folder
        imports the class (constructions the doctor cannot see), or when another class sets self.X too."""
        imported = getattr(self.folder_call_names, "imported", frozenset())
        candidates = []
        for cls in self.of_type(ast.ClassDef):
            inits = [d for d in cls.body if isinstance(d, ast.FunctionDef) and d.name == "__init__"]
            calls = [c for c in self.calls_named.get(cls.name, []) if isinstance(c.func, ast.Name)]
            if len(inits) != 1 or not calls or cls.name in imported or any(
                    isinstance(a, ast.Starred) for c in calls for a in c.args) or any(
                    k.arg is None for c in calls for k in c.keywords):
                continue
            params = [p.arg for p in [*inits[0].args.posonlyargs, *inits[0].args.args]][1:]
            for name, value in self.assignments(inits[0]):
                if name.startswith("self.") and isinstance(value, ast.Name) and value.id in params:
                    candidates.append((cls, name, params.index(value.id), value.id, calls))
        found = set()
        for cls, name, index, param, calls in candidates:
            passed = [c.args[index] if index < len(c.args) else keyword(c, param) for c in calls]
            if all(a is not None and self.is_rank_value(a) for a in passed) and not any(
                    target == name for other in self.of_type(ast.ClassDef) if other is not cls
                    for fn in other.body if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                    for target, _ in self.assignments(fn)):
                found.add(name)
        return found

    def single_node(self):
        """Whether the program is single-node by construction: it points the rendezvous at this machine itself
        (`os.environ["MASTER_ADDR"] = "localhost"` or "127.0.0.1", init_method="tcp://localhost:..." or
        "tcp://127.0.0.1:...") and starts its processes with mp.spawn (or start_processes): every process
        runs here, so a global rank is a local one. Read in this file, or in any file of its folder."""
        if getattr(self.folder_call_names, "single_node", False):
            return True
        if not hasattr(self, "_single_node"):
            local = any(dotted(t.value).endswith("environ") and is_const(t.slice, "MASTER_ADDR") and
                        isinstance(a.value, ast.Constant) and a.value.value in LOCAL_HOSTS
                        for a in self.of_type(ast.Assign) for t in a.targets if isinstance(t, ast.Subscript))
            local = local or any(isinstance(v, ast.Constant) and isinstance(v.value, str) and
                                 LOCAL_INIT.match(v.value) for c in self.named_calls("init_process_group")
                                 for v in [keyword(c, "init_method")])
            self._single_node = local and bool(self.named_calls("spawn", "start_processes")) or \
                self.joins_with_local_rank()
        return self._single_node

    def joins_with_local_rank(self):
        """Whether the program joins its group as its local rank: `init_process_group(..., rank=local_rank)`,
        the value read from LOCAL_RANK / SLURM_LOCALID or get_local_rank(), or the launcher's option
        (`args.local_rank`, where the file declares `--local_rank`), directly or through a name its function
        assigns from one. On a second node two processes would claim one rank and the group would not form:
        single-node by construction, where the global rank is the local rank."""
        calls = self.named_calls("init_process_group")
        option = bool(calls) and any(is_const(a, o) for c in self.named_calls("add_argument") for a in c.args
                                     for o in ("--local_rank", "--local-rank"))

        def local(value):
            return any((isinstance(n, ast.Constant) and n.value in ("LOCAL_RANK", "SLURM_LOCALID")) or
                       (isinstance(n, ast.Call) and last_name(n) in ("get_local_rank", "get_node_local_rank")) or
                       (option and isinstance(n, ast.Attribute) and n.attr == "local_rank" and
                        dotted(n).count(".") == 1 and not dotted(n).startswith("self."))
                       for n in walk(value))
        for call in calls:
            value = keyword(call, "rank")
            if value is None:
                continue
            if local(value) or isinstance(value, ast.Name) and any(
                    name == value.id and local(v) for name, v in self.assignments(self.scope(call))):
                return True
        return False

    # Rank tests proven by data flow (DDP011): no name guessing
    def _rank_flow(self):
        """Compute once: the names (and attribute names) that hold a rank by data flow, the names that hold a
        rank test, and the functions of the file whose return value is a rank test (is_main_process)."""
        if hasattr(self, "_rank_names"):
            return
        names = set(self._spawned_ranks())
        attrs = set(getattr(self.folder_call_names, "rank_attributes", ()))  # `.rank = get_rank()` in the folder
        for call in self.named_calls("add_argument"):  # options a launcher sets per process
            if any(is_const(a, o) for a in call.args for o in ("--local_rank", "--local-rank", "--rank")):
                attrs.add("rank" if any(is_const(a, "--rank") for a in call.args) else "local_rank")
        found = []
        for scope in [None, *self.functions_flat()]:
            found += self.assignments(scope)
            found += [(dotted(n.target), n.value) for n in self.statements(scope)
                      if isinstance(n, ast.AugAssign) and dotted(n.target)]
        self._rank_names, self._rank_attrs, self._rank_test_names = names, attrs, set()
        targets = [(name, defs, 0) for name, defs in self.functions.items()] + [  # Trainer(rank) -> __init__
            (c.name, [d for d in c.body if isinstance(d, ast.FunctionDef) and d.name == "__init__"], 1)
            for c in self.of_type(ast.ClassDef)]
        for _ in range(4):  # to a fixed point (args.rank = args.node * ngpus + gpu; rank = args.rank)
            before = (len(names), len(attrs))
            for name, value in found:
                if not isinstance(value, (ast.Compare, ast.UnaryOp)) and self.is_rank_value(value):
                    names.add(name)
                    if "." in name:
                        attrs.add(name.rpartition(".")[2])
            for fname, defs, skip in targets:  # a parameter that a call of the file passes a rank
                for call in self.calls_named.get(fname, []):
                    if not isinstance(call.func, ast.Name):
                        continue
                    for fn in defs:
                        params = [p.arg for p in [*fn.args.posonlyargs, *fn.args.args]][skip:]
                        passed = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
                        names.update(p for p, a in passed if not isinstance(a, ast.Starred) and self.is_rank_value(a))
            if (len(names), len(attrs)) == before:
                break
        self._rank_test_functions = set(getattr(self.folder_call_names, "rank_test_functions", ()))
        for name, defs in self.functions.items():
            returns = [n.value for d in defs for n in self.statements(d) if isinstance(n, ast.Return) and n.value]
            if returns and all(self.rank_test(r) for r in returns):
                self._rank_test_functions.add(name)
        self._partial_functions = self._find_partial_functions()
        self._rank_test_names = {name for name, value in found
                                 if isinstance(value, (ast.Compare, ast.BoolOp, ast.UnaryOp)) and self.rank_test(value)}

    def _rank_flags(self):
        """Names that hold a rank test as a flag: assigned only True and False, False somewhere, True only inside
        a rank test (`main = False; if dist.get_rank() == 0: main = True`) or on the one-process side of a
        "distributed or not" test (`else: main = True`), once at least inside a rank test. A flag set True on
        every rank is not one."""
        sides = {}  # name -> set of where its True assignments are ("rank", "one", "all"); False as "false"
        for scope in [None, *self.functions_flat()]:
            for node in self.statements(scope):
                if type(node) is not ast.Assign or len(node.targets) != 1 or not dotted(node.targets[0]):
                    continue
                name, value = dotted(node.targets[0]), node.value
                if not (isinstance(value, ast.Constant) and type(value.value) is bool):
                    sides.setdefault(name, set()).add("other")
                    continue
                if not value.value:
                    sides.setdefault(name, set()).add("false")
                    continue
                where = "all"
                for branch, in_body in self.enclosing_ifs(node):
                    if isinstance(branch, ast.If) and self.rank_test(branch.test):
                        where = "rank"
                        break
                    if self.one_process_side(branch, in_body):
                        where = "one"
                        break
                sides.setdefault(name, set()).add(where)
        return {name for name, found in sides.items() if "rank" in found and "false" in found and
                found <= {"rank", "one", "false"}}

    def is_rank_value(self, node, depth=0):
        """An expression whose value is a rank by data flow: get_rank(), get_local_rank(), get_node_local_rank(),
        RANK / LOCAL_RANK / SLURM_PROCID from the environment, an mp.spawn target's first parameter, an option a
        launcher sets (--local_rank), a name assigned from one of those, and arithmetic on them (`rank %
        ngpus`, `int(...)`, `a if c else b`); not any value computed with one (a device, a seed, a model)."""
        self._rank_flow()
        if depth > 12:
            return False
        if isinstance(node, ast.Call):
            name, full = last_name(node), dotted(node.func)
            if RANK_CALL.match(name):
                return True
            if full.endswith(("environ.get", "getenv")) and node.args:
                return isinstance(node.args[0], ast.Constant) and node.args[0].value in RANK_ENV
            return full in ("int", "str") and bool(node.args) and self.is_rank_value(node.args[0], depth + 1)
        if isinstance(node, ast.Subscript):
            return dotted(node.value).endswith("environ") and isinstance(node.slice, ast.Constant) and \
                node.slice.value in RANK_ENV
        if isinstance(node, ast.Name):
            return node.id in self._rank_names
        if isinstance(node, ast.Attribute):
            return dotted(node) in self._rank_names or node.attr in self._rank_attrs
        if isinstance(node, ast.BinOp):
            return self.is_rank_value(node.left, depth + 1) or self.is_rank_value(node.right, depth + 1)
        if isinstance(node, ast.IfExp):
            return self.is_rank_value(node.body, depth + 1) or self.is_rank_value(node.orelse, depth + 1)
        if isinstance(node, ast.BoolOp):
            return any(self.is_rank_value(v, depth + 1) for v in node.values)
        return False

    def rank_test(self, node, every=False):
        """A test that some ranks of a distributed run pass and others do not, proven by data flow: a comparison
        of a rank value that different ranks answer differently (`rank == 0`, not `rank >= 0` nor `rank is
        None`), a name that holds one, `not rank`, or a call of a helper that returns one (is_main_process).
        `and` / `or` / `not` are looked through: any part (every=False) or every part (every=True)."""
        self._rank_flow()
        todo, leaves = [node], 0
        while todo:
            node = todo.pop()
            if isinstance(node, ast.BoolOp):
                todo.extend(node.values)
                continue
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                todo.append(node.operand)
                continue
            if self._simple_rank_test(node):
                if not every:
                    return True
                leaves += 1
            elif every:
                return False
        return every and leaves > 0

    def _simple_rank_test(self, node):
        if self._partial_functions and type(node) in (ast.Name, ast.Compare) and self.present_side(node) is not None:
            return True  # `x is not None`, x from a function that returns it on some ranks only
        if isinstance(node, ast.Compare):
            if asks_how_launched(node):
                return False
            found = compared_with_constant(node)
            if found is not None:
                subject, kind, value = found
                if not self.is_rank_value(subject):
                    return False
                seen = answers(kind, value, RANK_SAMPLES)
                return seen is not None and len(set(seen)) > 1  # `rank >= 0`, `rank != -1`: every rank alike
            return any(self.is_rank_value(side) for side in [node.left, *node.comparators]
                       if not isinstance(side, ast.Constant))
        if isinstance(node, (ast.Name, ast.Attribute)):
            return dotted(node) in self._rank_test_names or self.is_rank_value(node)  # `if main:`, `if not rank:`
        if isinstance(node, ast.Call):
            return last_name(node) in self._rank_test_functions and not node.args
        return False

    # Values that only some ranks receive (DDP005, DDP011)
    def _partial_candidates(self):
        """Compute once, by syntax alone: function name -> for each of its definitions, the (`if`, side) pairs
        that hold every one of its returns of a value other than None (a bare return, `return None` and the end
        of the function give None). A name is kept when each definition has such a pair and no yield; the
        caller then asks whether one of the pairs' tests is a rank test (_find_partial_functions)."""
        if not hasattr(self, "_partial_pairs"):
            generators = {self._function_of(n) for n in self.of_type(ast.Yield, ast.YieldFrom)}
            by_def = {}  # definition -> the (if, side) pairs common to its returns of a value
            for ret in self.of_type(ast.Return):
                fn = self.scope(ret)
                if ret.value is None or is_const(ret.value, None) or by_def.get(fn, True) is None:
                    continue
                sides = {(b, side) for b, side in self.enclosing_ifs(ret) if isinstance(b, ast.If)}
                by_def[fn] = sides if fn not in by_def else by_def[fn] & sides
                if not by_def[fn]:
                    by_def[fn] = None  # a value returned outside any one branch: every rank may receive one
            self._partial_pairs = {}
            for name, defs in self.functions.items():
                found = [by_def.get(d) for d in defs]
                if all(found) and not any(d in generators for d in defs):
                    self._partial_pairs[name] = found
        return self._partial_pairs

    def _find_partial_functions(self):
        """The functions of the file that return a value other than None only on one side of a rank test, every
        other return giving None: `online_eval()` returns its measures under `if not args.distributed or gpu ==
        0:` and None elsewhere, so only that rank receives them. Every definition of the name alike; called at
        the end of _rank_flow, with its rank tests (while it runs, no value is partial)."""
        return frozenset(name for name, defs in self._partial_candidates().items()
                         if all(any(self._limits_ranks(b.test) for b, _ in pairs) for pairs in defs))

    def _limits_ranks(self, test, depth=0):
        """Whether only some ranks of a distributed run pass test: a rank test (`gpu == 0`, `not rank`,
        is_main_process()), `and` with one, or `or` of rank tests and job-wide settings (`not
        args.multiprocessing_distributed or gpu == 0`: a flag or a "distributed or not" test, the same on
        every rank); not `rank == 0 or epoch > 3`, which other ranks pass too."""
        if depth > 20:
            return False
        if isinstance(test, ast.BoolOp):
            parts = [self._limits_ranks(v, depth + 1) for v in test.values]
            if isinstance(test.op, ast.And):
                return any(parts)
            return any(parts) and all(p or self._job_wide(v) for p, v in zip(parts, test.values))
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return not isinstance(test.operand, ast.BoolOp) and self._limits_ranks(test.operand, depth + 1)
        return self._simple_rank_test(test)

    def _job_wide(self, test):
        """A test every rank answers alike: "distributed or not" (test_polarity), or a flag (a name or an
        attribute, `not` one, that holds no rank): an option of the run."""
        if self.test_polarity(test) is not None:
            return True
        while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        return isinstance(test, (ast.Name, ast.Attribute)) and not self._simple_rank_test(test)

    def holds_partial(self, name):
        """Whether a name (an ast.Name read in a test) holds the value of a function that returns one on some
        ranks only (_find_partial_functions): every assignment of it that reaches the test, in its function,
        is a resolved call of one (`f(...)`, `self.f(...)`)."""
        candidates = self._partial_candidates()
        if not candidates:
            return False
        values = self.reaching_values(name.id, name)
        if not values or not all(isinstance(v, ast.Call) and last_name(v) in candidates and (
                isinstance(v.func, ast.Name) or (isinstance(v.func, ast.Attribute) and isinstance(
                    v.func.value, ast.Name) and v.func.value.id in ("self", "cls"))) for v in values):
            return False
        self._rank_flow()
        return all(last_name(v) in self._partial_functions for v in values)

    def present_side(self, test, depth=0):
        """For a test on a value only some ranks receive (holds_partial): True when the body of `if test:` runs
        only where the value is present (`x is not None`, `x`, `x is not None and ...`), False when the `else`
        does (`x is None`, `not x`, `x is None or ...`); None for any other test. Read once per test."""
        if depth == 0:
            if not hasattr(self, "_present"):
                self._present = {}
            if test not in self._present:
                self._present[test] = self.present_side(test, 1)
            return self._present[test]
        kind = type(test)
        if kind is ast.Name:
            return True if self.holds_partial(test) else None
        if kind is ast.Compare:
            if len(test.ops) == 1 and type(test.ops[0]) in (ast.Is, ast.IsNot) and \
                    is_const(test.comparators[0], None) and isinstance(test.left, ast.Name) and \
                    self.holds_partial(test.left):
                return isinstance(test.ops[0], ast.IsNot)
            return None
        if depth > 20:
            return None
        if kind is ast.UnaryOp and isinstance(test.op, ast.Not):
            inner = self.present_side(test.operand, depth + 1)
            return None if inner is None else not inner
        if kind is ast.BoolOp:  # `and`: one part present -> the body; `or`: one part absent -> the else
            wanted = isinstance(test.op, ast.And)
            if any(self.present_side(v, depth + 1) is wanted for v in test.values):
                return wanted
        return None

    def receives_partial_value(self, node):
        """Whether node runs only where a value that some ranks receive is present (present_side): on that side
        of an `if` around it in its function, or after `if x is None: return` (continue) before it, in its
        block or a block around it. (A guard for DDP005: the ranks without the value do not get there.)"""
        if not self._partial_candidates():
            return False
        for branch, in_body in self.enclosing_ifs(node):
            if isinstance(branch, (ast.If, ast.IfExp)) and self.present_side(branch.test) is in_body:
                return True
        child = self.statement(node)
        for a in self.ancestors(child):
            if isinstance(a, SCOPES):
                break
            where = self.position.get(child)
            if where is not None:
                key = (a, where[0], "partial")
                if key not in self._first_exit:  # read once per block, as first_rank_exit
                    siblings = getattr(a, where[0])
                    self._first_exit[key] = next((i for i, s in enumerate(siblings) if isinstance(s, ast.If) and any(
                        isinstance(b, (ast.Return, ast.Continue)) for b in s.body) and
                        self.present_side(s.test) is False), len(siblings))
                if self._first_exit[key] < where[1]:
                    return True
            child = a
        return False

    def of_type(self, *kinds, ordered=False):
        """The nodes of these types: type by type, or (ordered: loops only) in the order of the walk."""
        if len(kinds) == 1:
            return self.by_type.get(kinds[0], [])
        if ordered:
            wanted = set(kinds)
            if not wanted <= LOOPS:
                raise ValueError("of_type(..., ordered=True) is for loops only")
            return [n for n in self._loops if type(n) in wanted]
        return [n for kind in kinds for n in self.by_type.get(kind, [])]

    def strings(self):
        """text -> the string constants with that text, in the order of the walk (found by _index): what the
        rules ask of string constants."""
        return self._strings

    def named_calls(self, *names):
        """The calls of functions with these last names (torch.save(...) is named 'save'), name by name."""
        return [c for name in dict.fromkeys(names) for c in self.calls_named.get(name, [])]

    def functions_flat(self):
        return [d for defs in self.functions.values() for d in defs]

    def mentions_rank(self, test):
        """mentions_rank with this file's aliases, computed once per node (many calls share one test)."""
        found = self._mentions.get(test)
        if found is None:
            found = self._mentions[test] = mentions_rank(test, self.rank_aliases) or self.calls_rank_test_helper(test)
        return found

    def calls_rank_test_helper(self, test):
        """Whether a test calls, without arguments, a helper that returns a rank test, whatever its name:
        `if is_first_worker():`, where a file of the folder (or this one) defines `def is_first_worker(): return
        not dist.is_available() or not dist.is_initialized() or dist.get_rank() == 0` (not a helper that every
        rank passes alike, `return dist.get_rank() >= 0`)."""
        if not hasattr(self, "_argless_helpers"):  # built once: asked for every test of the file
            self._argless_helpers = getattr(self.folder_call_names, "rank_test_functions", frozenset()) | {
                name for name, defs in self.functions.items() if len(defs) == 1 and not defs[0].args.args}
        helpers = self._argless_helpers
        calls = [n for n in walk(test) if type(n) is ast.Call and not n.args and last_name(n) in helpers]
        if not calls or asks_how_launched(test):
            return False
        self._rank_flow()
        return any(last_name(n) in self._rank_test_functions for n in calls)

    def reads_rank(self, node):
        """is_any_rank_expr(node), answered from one pass over the file: the nodes that read a rank and
        everything above them, so that asking for every assigned value is linear."""
        if self._reading_rank is None:
            sources = [c for name in self.call_names if re.search(r"get_(node_)?(local_)?rank", name)
                       for c in self.calls_named[name]]
            sources += [n for name in RANK_VARIABLES for n in self.strings().get(name, [])]
            self._reading_rank = self.holders(sources)
        return node in self._reading_rank

    def holders(self, found):
        """The nodes found and every node above them: `x in m.holders(found)` says whether x holds one of them
        (as a walk over x would), and asking it for every node is linear."""
        holding = set()
        for node in found:
            while node is not None and node not in holding:
                holding.add(node)
                node = self.parent.get(node)
        return holding

    # where a node sits
    def ancestors(self, node):
        while node in self.parent:
            node = self.parent[node]
            yield node

    def scope(self, node):
        """The function (or class, or lambda) a node is in (None at module level): the nearest one above it. Found
        by going up its parents, and kept for every node passed on the way, so that asking for every node of the
        file is linear."""
        scope_of = self.scope_of
        passed = []
        while node not in scope_of:
            passed.append(node)
            above = self.parent.get(node)
            if above is None or type(above) in SCOPE_TYPES:
                found = above
                break
            node = above
        else:
            found = scope_of[node]
        for node in passed:
            scope_of[node] = found
        return found

    def statement(self, node):
        """The statement node is (or is in)."""
        while not isinstance(node, ast.stmt):
            node = self.parent[node]
        return node

    def scope_nodes(self, scope):
        """Nodes of one function (or of the module), not of the functions inside it (those functions themselves
        are), in the order of the walk's parents: computed once per scope, when a rule asks."""
        root = scope or self.tree
        if root not in self._scope_nodes:
            found, todo = [], [root]
            while todo:
                node = todo.pop()
                for field, _ in _LAYOUT[type(node)]:
                    value = getattr(node, field)
                    for child in value if type(value) is list else [value]:
                        if child is not None:
                            found.append(child)
                            if type(child) not in SCOPE_TYPES:
                                todo.append(child)
            self._scope_nodes[root] = found
        return self._scope_nodes[root]

    def statements(self, scope):
        """The statements of one function (or of the module), not of the functions inside it: the statements
        of scope_nodes(scope), in their order."""
        return self._statements[scope or self.tree]

    def assignments(self, scope):
        """(target, value) of every assignment in one scope, tuples unpacked (computed once)."""
        root = scope or self.tree
        if root not in self._assignments:
            found = []
            for node in self.statements(scope):
                kind = type(node)
                if kind is ast.Assign:
                    for target in node.targets:
                        if type(target) is ast.Name:  # most assignments: `x = ...`, without pairs() and dotted()
                            found.append((target.id, node.value))
                        else:
                            found += [(dotted(t), v) for t, v in pairs(target, node.value)]
                elif kind is ast.AnnAssign and node.value is not None:
                    found.append((dotted(node.target), node.value))
            self._assignments[root] = [(name, v) for name, v in found if name]
        return self._assignments[root]

    def reaching_values(self, name, node):
        """The values of the assignments of name (a plain name) that may reach node in its function: the nearest
        plain assignment before node in its block or a block around it, and those inside compound statements
        between (an `if` that may set it); a branch of an if/elif chain is not reached by the others' assignments.
        Inside a loop, the loop's own assignments may come round again. None when no assignment of the function
        reaches it (a parameter, a global): the caller decides."""
        found, child = [], self.statement(node)
        for a in self.ancestors(child):
            where = self.position.get(child)
            if where is not None:
                for index, values, plain in reversed(self._assigned_in_block(a, where[0], name)):
                    if index < where[1]:
                        found += values
                        if plain:
                            return found  # a plain assignment at this level: nothing earlier reaches node
            if isinstance(a, SCOPES):
                break
            if isinstance(a, (ast.For, ast.AsyncFor, ast.While)):
                found += [v for _, values, _ in self._assigned_in_block(a, "body", name) for v in values]
            child = a
        return found or None

    def behind_unset_flag(self, node):
        """Whether node runs only under `if flag:` where flag is a parameter of its function that defaults to
        False (or None) and that no call of the function in the file passes (by keyword or position; for
        __init__, the calls of its class), the file calling it at least once, without **kwargs, and no other
        file of the folder calling it: code the script never runs."""
        fn = self.scope(node)
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        params = [*fn.args.posonlyargs, *fn.args.args]
        defaults = dict(zip([p.arg for p in params][len(params) - len(fn.args.defaults):], fn.args.defaults))
        defaults.update((p.arg, d) for p, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None)
        flags = {name for name, d in defaults.items() if is_const(d, False) or (isinstance(d, ast.Constant) and
                                                                                  d.value is None)}
        tested = {b.test.id for b, in_body in self.enclosing_ifs(node)
                  if isinstance(b, ast.If) and in_body and isinstance(b.test, ast.Name)} & flags
        if not tested:
            return False
        owner = self.parent.get(fn)
        name = owner.name if fn.name == "__init__" and isinstance(owner, ast.ClassDef) else fn.name
        calls = self.named_calls(name)
        if not calls or name in self.folder_call_names:
            return False  # never called here (a library function), or perhaps called from another file
        names = [p.arg for p in params]
        offset = 1 if names and names[0] in ("self", "cls") else 0
        for call in calls:
            if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
                return False
            for flag in tested:
                if keyword(call, flag) is not None or (
                        flag in names and len(call.args) > names.index(flag) - offset):
                    return False
        return True

    def _assigned_in_block(self, block, field, name):
        """[(index, values, plain assignment?)] of the statements of one block that assign name: read once per
        block and name, so that asking for many uses is linear."""
        key = (block, field, name)
        if not hasattr(self, "_block_assignments"):
            self._block_assignments = {}
        if key not in self._block_assignments:
            found = []
            for index, stmt in enumerate(getattr(block, field)):
                values = assigned_values([stmt], name)
                if values:
                    found.append((index, values, isinstance(stmt, (ast.Assign, ast.AnnAssign))))
            self._block_assignments[key] = found
        return self._block_assignments[key]

    def enclosing_ifs(self, node):
        """(if statement, True if node is in its body / False in its orelse) up to the function."""
        child, parent = node, self.parent
        while child in parent:  # (the ancestors, read without a second generator: asked for many nodes)
            a = parent[child]
            kind = type(a)
            if kind in SCOPE_TYPES:
                return
            if kind in BRANCHES and child is not a.test:  # (a statement's place says which block holds it)
                yield a, child is a.body if kind is ast.IfExp else self.position[child][0] == "body"
            child = a

    def locally_guarded(self, node):
        """Inside an `if` about the rank, or after `if <rank test>: return`, in the same function."""
        if node not in self._guarded:
            self._guarded[node] = self._locally_guarded(node)
        return self._guarded[node]

    def _locally_guarded(self, node):
        for branch, in_body in self.enclosing_ifs(node):
            if type(branch) is not ast.While:  # an `if` or a conditional expression: one_process_side, read here
                polarity = self.test_polarity(branch.test)
                if polarity is not None:
                    if in_body != polarity:
                        return True  # the `else` of `if ddp:`: the run that is not distributed, one process
                    continue  # the side every rank of a distributed run takes
            if self.mentions_rank(branch.test):
                return True
        return self.after_first_rank_exit(self.statement(node)) or self.receives_partial_value(node)

    def after_first_rank_exit(self, statement):
        """Whether a statement comes after `if <rank test>: return` (first_rank_exit) in its block or in a block
        around it, up to its function. Kept for every statement passed on the way up, so that asking for every
        statement of the file is linear."""
        known, passed, a = self._after_exit, [], statement
        while a is not None and type(a) not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module):
            found = known.get(a)
            if found is not None:
                break
            passed.append(a)
            where = self.position.get(a)
            if where is not None and self.first_rank_exit(self.parent[a], where[0]) < where[1]:
                found = True
                break
            a = self.parent.get(a)
        else:
            found = False
        for a in passed:
            known[a] = found
        return found

    def first_rank_exit(self, block, field):
        """The index of the first `if <rank test>: return` (or continue, raise, exit()) in one list of
        statements, len(list) if none: computed once per list, so that asking for every statement is linear."""
        key = (block, field)
        found = self._first_exit.get(key)
        if found is None:
            found = self._first_exit[key] = next(
                (i for i, s in self.exiting_ifs().get(key, ()) if self.mentions_rank(s.test) and
                 self.test_polarity(s.test) is None), len(getattr(block, field)))
        return found

    def exiting_ifs(self):
        """(block, field) -> [(index, if statement)] of the `if`s whose body returns, continues, raises or calls
        exit() (whatever their test), in the order of the block: read once from the file's `if`s, so that
        first_rank_exit reads no block statement by statement."""
        if not hasattr(self, "_exiting_ifs"):
            self._exiting_ifs = found = {}
            for s in self.of_type(ast.If):
                if any(isinstance(b, (ast.Return, ast.Continue, ast.Raise)) or
                       (isinstance(b, ast.Expr) and last_name(b.value) in ("exit", "_exit")) for b in s.body):
                    field, index = self.position[s]
                    found.setdefault((self.parent[s], field), []).append((index, s))
            for ifs in found.values():
                ifs.sort(key=itemgetter(0))
        return self._exiting_ifs

    def after_rank_exit(self, node):
        """The `if <rank test>: return` (or continue) that comes before node in its function, at the level of
        node's statement or of a block around it; None if there is none. Read once per block. (A raise or an
        exit() ends the process: the launcher then stops the others, a crash rather than a hang.)"""
        stmt = self.statement(node)
        for a in [stmt, *self.ancestors(stmt)]:
            if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module, ast.Lambda, ast.ClassDef)):
                return None
            if a in self.position:
                field, index = self.position[a]
                key = (self.parent[a], field, "strict")
                if key not in self._first_exit:
                    siblings = getattr(self.parent[a], field)
                    self._first_exit[key] = next(
                        (i for i, s in enumerate(siblings) if isinstance(s, ast.If) and any(
                            isinstance(b, (ast.Return, ast.Continue)) for b in s.body) and
                         self.rank_test(s.test, every=True)),  # (the body first, as in first_rank_exit)
                        len(siblings))
                if self._first_exit[key] < index:
                    return getattr(self.parent[a], field)[self._first_exit[key]]
        return None

    def _unguarded_functions(self):
        """Functions that some rank-unguarded path of the file calls. A function the file never calls is
        not in the set (nothing to say about it)."""
        decorated = {name for name, defs in self.functions.items()  # @rank_zero_only and the like
                     if any(text_mentions(d, RANKISH) for f in defs for d in f.decorator_list)}
        unguarded = {a.id for c in self.named_calls("spawn", "start_processes", "Process")
                     for a in [*c.args, *(k.value for k in c.keywords)]  # mp.spawn(train, ...): every rank
                     if isinstance(a, ast.Name) and a.id in self.functions} - decorated
        calls_from = {}  # name of the calling scope (None: module level) -> calls of this file's functions
        for call in self.named_calls(*self.functions):
            scope = self.scope(call)
            calls_from.setdefault(None if scope is None else getattr(scope, "name", ""), []).append(call)
        todo = [None, *unguarded]  # a worklist: each caller's calls are read once
        while todo:
            for call in calls_from.get(todo.pop(), []):
                name = last_name(call)
                if name not in unguarded and name not in decorated and not self.locally_guarded(call):
                    unguarded.add(name)
                    todo.append(name)
        return unguarded

    def before_group(self, node):
        """Whether node runs before its function forms the process group: the function (or the module) calls
        init_process_group itself, and node sits on an earlier line, in no loop that reaches the call. Such code runs in
        a process that has not joined the job yet (a single-process branch, a setup step)."""
        if not hasattr(self, "_first_init"):
            self._first_init = {}
            for call in self.named_calls("init_process_group"):
                scope = self.scope(call)
                self._first_init[scope] = min(self._first_init.get(scope, call.lineno), call.lineno)
        scope = self.scope(node)
        if scope not in self._first_init or node.lineno >= self._first_init[scope]:
            return False
        return not any(isinstance(a, (ast.For, ast.AsyncFor, ast.While)) and a.end_lineno >= self._first_init[scope]
                       for a in self.ancestors(node) if self.scope(a) is scope)  # a loop around both

    # The distributed part of a program that forms its group (DDP005, DDP008)
    def outside_group(self, node):
        """Whether node runs in one process, outside the job: before its function forms the group (before_group),
        or, in a file that forms the group itself (init_process_group), in code that no path from the group's
        forming reaches. A function runs in the distributed part only if it forms the group itself before node
        (init_process_group, or a call of a function of the file that forms it), or if a call the file resolves
        (`f()`, `self.f()`) reaches it from a point that follows such a call, or from a function that does: the
        `elif` beside `if command == "train": train()` does not follow it. A function handed to a call as a
        callback (`tune.run(partial(trial, ...))`) runs where the function that hands it runs (_callback_call),
        in the job if that function forms the group anywhere. Where the doctor cannot tell (a
        function the file never calls, or that it names otherwise: `mp.spawn(f)`, `obj.f()`, imported by a file
        of the folder), the function counts as distributed: today's answer."""
        if self.before_group(node):
            return True
        if not self.joins_group:
            return False
        status, points = self._group_reach()
        fn = self._function_of(node)
        if any(self._precedes(p, node) for p in points.get(fn, ())):
            return False
        return (fn is None or status.get(fn.name) == OUTSIDE) and not (
            fn is not None and any(isinstance(a, SCOPES) and not isinstance(a, ast.ClassDef) and
                                   status.get(getattr(a, "name", None)) != OUTSIDE for a in self.ancestors(fn)))

    def _function_of(self, node):
        """The function (def) that node runs in, through lambdas and classes; None at module level."""
        scope = self.scope(node)
        while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scope = self.scope(scope)
        return scope

    def _group_reach(self):
        """Compute once: each function's place (OUTSIDE the group, UNKNOWN, DISTRIBUTED) and, per function (None:
        the module), the calls in it that form the group. A function is DISTRIBUTED if some resolved call of it
        follows a group-forming call in its caller or sits in a DISTRIBUTED caller; UNKNOWN if a call or a caller
        is UNKNOWN, or the file names it otherwise than in a resolved call; else OUTSIDE. To a fixed point."""
        if hasattr(self, "_group_status"):
            return self._group_status, self._group_points
        names = set(self.functions)
        resolved, unresolved = defaultdict(list), set()  # name -> its resolved calls; names used otherwise
        handed = set()  # the calls that take a function of the file as an argument: a callback (below)
        for node in self.of_type(ast.Name):
            if node.id in names and not (isinstance(self.parent.get(node), ast.Call) and
                                         self.parent[node].func is node):
                call = self._callback_call(node)
                if call is None:
                    unresolved.add(node.id)  # mp.spawn(main), {"train": train}, Process(target=run)
                else:
                    resolved[node.id].append(call)
                    handed.add(call)
        for node in self.of_type(ast.Attribute):
            if node.attr in names:
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and \
                        isinstance(self.parent.get(node), ast.Call) and self.parent[node].func is node:
                    continue
                unresolved.add(node.attr)  # obj.f(), module.f(): another object's function, perhaps
        for call in self.named_calls(*names):
            func = call.func
            if isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                              and func.value.id in ("self", "cls")):
                resolved[last_name(call)].append(call)
        unresolved |= names & getattr(self.folder_call_names, "imported", frozenset())
        unresolved |= names - set(resolved)  # never called here: the doctor cannot tell
        switches = self._group_switches()
        while True:  # (again without a switch of a function that forms the group through another function too)
            forming, todo = {"init_process_group"}, ["init_process_group"]  # the names whose calls form the group
            through = set()  # the names that form it through a function of the file
            while todo:  # through every call of such a name, resolved or not (more forming: more code in the job)
                called = todo.pop()
                for call in self.calls_named.get(called, []):
                    if self._switched_off(call, switches.get(called)):
                        continue  # train_worker(..., is_distributed=False): this call forms no group
                    caller = self._function_of(call)
                    found = [] if caller is None else [caller.name]
                    if caller is not None and caller.name == "__init__" and \
                            isinstance(self.parent.get(caller), ast.ClassDef):
                        found.append(self.parent[caller].name)  # Trainer(...) runs the __init__ that forms it
                    if called != "init_process_group":
                        through.update(found)
                    for name in found:
                        if name not in forming:
                            forming.add(name)
                            todo.append(name)
            if not through & set(switches):
                break
            switches = {name: switch for name, switch in switches.items() if name not in through}
        points = defaultdict(list)
        for call in self.named_calls(*forming):
            if not self._switched_off(call, switches.get(last_name(call))):
                points[self._function_of(call)].append(call)
        status = {name: UNKNOWN if name in unresolved else OUTSIDE for name in names}
        after = {call: any(call in handed or self._precedes(p, call) for p in points.get(self._function_of(call), ()))
                 for calls in resolved.values() for call in calls}  # a callback may run later: any point counts
        changed = True
        while changed:
            changed = False
            for name, calls in resolved.items():
                for call in calls:
                    caller = self._function_of(call)
                    place = DISTRIBUTED if after[call] else OUTSIDE if caller is None else status[caller.name]
                    if place > status[name]:
                        status[name] = place
                        changed = True
        self._group_status, self._group_points = status, points
        return status, points

    def _callback_call(self, name):
        """The call that name (a function of the file) is handed to as an argument, `tune.run(partial(trial,
        data_path=p))`, `tune.with_parameters(trial)`, `trainer.fit(step)`, when the function that holds that call
        starts no process (mp.spawn, Process, Pool, start_processes, launch, submit): such a callback runs in the
        holder's process, in the job only where the holder is (or forms the group itself). None for any other use
        of the name (a dict, a list) and for a call that may start a process, by position or by keyword
        (`mp.spawn(main)`, `Process(target=run)`): the doctor cannot tell."""
        call = self.parent.get(name)
        if isinstance(call, ast.keyword):
            call = self.parent.get(call)
        if not isinstance(call, ast.Call) or call.func is name or last_name(call) in PROCESS_STARTERS:
            return None
        holder = self._function_of(call)
        if not hasattr(self, "_starting_holders"):
            self._starting_holders = {self._function_of(c) for c in self.named_calls(*PROCESS_STARTERS)}
        return None if holder in self._starting_holders else call

    def _group_switches(self):
        """name -> (parameter, its position) of each function of the file that forms the group only under `if
        flag:`, flag one of its parameters (`def train_worker(..., is_distributed=False)` with `if
        is_distributed: dist.init_process_group(...)`): a call that passes False for it forms no group."""
        found, off = {}, set()
        for call in self.calls_named.get("init_process_group", []):
            fn = self._function_of(call)
            if fn is None:
                continue
            params = [p.arg for p in [*fn.args.posonlyargs, *fn.args.args]]
            kwonly = [p.arg for p in fn.args.kwonlyargs]
            tested = [b.test.id for b, in_body in self.enclosing_ifs(call) if type(b) is ast.If and in_body
                      and type(b.test) is ast.Name and b.test.id in params + kwonly]
            switch = (tested[0], params.index(tested[0]) - (params[:1] in (["self"], ["cls"]))
                      if tested[0] in params else None) if tested else None
            if switch is None or found.get(fn.name, switch) != switch or len(self.functions.get(fn.name, ())) != 1:
                off.add(fn.name)
            else:
                found[fn.name] = switch
        return {name: switch for name, switch in found.items() if name not in off}

    @staticmethod
    def _switched_off(call, switch):
        """Whether a call passes a constant False for the parameter that switches its function's group on."""
        if switch is None:
            return False
        name, index = switch
        value = keyword(call, name)
        if value is None and index is not None and 0 <= index < len(call.args) and not any(
                type(a) is ast.Starred for a in call.args[:index + 1]):
            value = call.args[index]
        return value is not None and is_const(value, False)

    def _precedes(self, first, node):
        """Whether first (a call) may run before node in their function: first sits in a statement before
        node's in a block around both, or in node's own arguments, or a loop holds both; not when they sit in
        two branches of one `if` (an `elif` of the dispatch)."""
        if first is node:
            return False
        path = {}  # ancestor of first -> the child on the way to first
        child = first
        for a in self.ancestors(first):
            path[a] = child
            child = a
        if node in path:
            return True  # first is inside node: `train(setup())`
        child = node
        for a in self.ancestors(node):
            if a is first:
                return False  # node is inside first's own arguments
            if a in path:
                top, mine = path[a], child
                break
            child = a
        else:
            return False
        common = a
        for b in [common, *self.ancestors(common)]:
            if isinstance(b, SCOPES):
                break
            if type(b) in LOOPS:
                return True  # round the loop again: the next pass follows the first
        where, mine_at = self.position.get(top), self.position.get(mine)
        if where and mine_at:
            if where[0] == mine_at[0]:
                return where[1] < mine_at[1]
            order = ("body", "handlers", "orelse", "finalbody")  # a try's blocks, in the order they run
            if isinstance(common, ast.Try) and where[0] in order and mine_at[0] in order:
                return order.index(where[0]) < order.index(mine_at[0])
            return False  # the two sides of an if
        return (top.lineno, top.col_offset) < (mine.lineno, mine.col_offset) and not isinstance(common, ast.IfExp)

    def guarded(self, node):
        if self.locally_guarded(node):
            return True
        scope = self.scope(node)
        return scope is not None and getattr(scope, "name", None) not in self.unguarded_functions

    def _collective_functions(self):
        """Functions of this file that call a collective, directly or through another such function."""
        functions = set(self.of_type(ast.FunctionDef, ast.AsyncFunctionDef))
        found, callers = set(), {}  # callers: callee name -> names of the functions that call it
        for callee in (self.functions.keys() | COLLECTIVES) & self.calls_named.keys():  # the calls that matter
            for call in self.calls_named[callee]:
                scope = self.scope(call)  # `self.f()` or `f()`, not `other().f()`: another object's method
                if scope in functions and (callee in COLLECTIVES or isinstance(call.func, ast.Name) or (
                        isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name))):
                    callers.setdefault(callee, set()).add(scope.name)
                    if callee in COLLECTIVES and self.is_collective(call):
                        found.add(scope.name)
        todo = list(found)  # a worklist over the callers: linear in the calls
        while todo:
            for name in callers.get(todo.pop(), ()):
                if name not in found:
                    found.add(name)
                    todo.append(name)
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

    def buffered_classes(self):
        """The classes of this file (by name) that build a module with buffers, directly or through another such
        class of the file or its folder (to a fixed point), and the folder's own such classes."""
        if not hasattr(self, "_buffered_classes"):
            classes = {c.name: c for c in self.of_type(ast.ClassDef)}
            made = {name: {last_name(n) for n in walk(c) if isinstance(n, ast.Call)} |
                    {last_name(b) for b in c.bases} for name, c in classes.items()}
            found = {name for name, c in classes.items() if any(
                isinstance(n, ast.Call) and builds_buffers(n) for n in walk(c)) or
                any(BN_MODELS.match(last_name(b)) for b in c.bases)} | set(self.folder_buffered_classes)
            changed = True
            while changed:
                changed = False
                for name in classes:
                    if name not in found and made[name] & found:
                        found.add(name)
                        changed = True
            self._buffered_classes = frozenset(found)
        return self._buffered_classes

    def has_buffers(self, expr, scope, depth=0, seen=None, converted=True):
        """Whether the doctor can see buffers in the module expr builds: a layer or model with buffers, a class
        of the file or its folder that builds one, through the names it is bound to (model = Net(); model =
        DDP(model)), nn.Sequential(backbone, head) and the like. False where it cannot see (a parameter, a
        model from a factory it does not know): silence. With converted=False, convert_sync_batchnorm(model)
        alone is no sign: it swaps the BatchNorm layers a model has, and a model from a factory may have none."""
        seen = set() if seen is None else seen
        if depth > 6 or expr is None:
            return False
        buffered = self.buffered_classes()
        todo = [expr]
        while todo:
            node = todo.pop()
            for n in walk(node):
                if isinstance(n, ast.Call) and (builds_buffers(n) or last_name(n) in buffered) and (
                        converted or last_name(n) != "convert_sync_batchnorm"):
                    return True
                if isinstance(n, ast.Name) or (isinstance(n, ast.Attribute) and dotted(n).startswith("self.")):
                    name = dotted(n)
                    if name and name not in seen:
                        seen.add(name)
                        for where in ({scope, None} if not name.startswith("self.") else
                                      {scope, None, *self.functions_flat()}):
                            todo += [v for target, v in self.assignments(where) if target == name]
                            todo += [n.value for n in self.statements(where) if isinstance(n, ast.Assign) and any(
                                isinstance(t, (ast.Tuple, ast.List)) and not isinstance(n.value, (ast.Tuple, ast.List))
                                and name in {dotted(e) for e in t.elts} for t in n.targets)]  # a, b = make()
                    if len(seen) > 50:
                        return False
        return False

    def epoch_loops(self):
        if not hasattr(self, "_epoch_loops"):
            self._epoch_loops = [n for n in self.of_type(ast.For, ast.AsyncFor, ordered=True) if is_epoch_loop(n)]
        return self._epoch_loops

    def is_epoch_loop(self, loop):
        if not hasattr(self, "_epoch_loop_set"):
            self._epoch_loop_set = set(self.epoch_loops())
        return loop in self._epoch_loop_set

    # code that nothing runs
    def in_unreferred_function(self, node):
        """Whether node is inside a function (or method) that nothing in the program refers to, or inside a class
        that nothing refers to (_unreferred_class), in a program with an entry point (a library file read alone
        keeps its findings): no rule reports what never runs.
        Asked only for the nodes of findings; what it needs is built once, when first asked."""
        uncalled = self.uncalled_lines()
        if node.lineno >= len(uncalled) or not uncalled[node.lineno]:
            return False
        known = self._unreferred_scopes
        scope = self.scope(node)
        if scope not in known:
            known[scope] = (type(scope) in (ast.FunctionDef, ast.AsyncFunctionDef) and self._unreferred(scope) or
                            type(scope) is ast.ClassDef and self._unreferred_class(scope)) and \
                self.has_entry_point() or self.in_unreferred_function(scope)
        return known[scope]

    def uncalled_lines(self):
        """lines[n] is 1 where line n is in a function that nothing calls by name (_not_called), the candidates
        of in_unreferred_function: most files have none, and a finding elsewhere costs one look (driver)."""
        if not hasattr(self, "_uncalled_lines"):
            self._unreferred_scopes = {None: False}  # scope -> whether it is, or is in, an unreferred function
            spans = [(f.lineno, f.end_lineno or f.lineno) for defs in self.functions.values() for f in defs
                     if self._not_called(f)]
            spans += [(c.lineno, c.end_lineno or c.lineno) for c in self.of_type(ast.ClassDef)
                      if not c.decorator_list and not c.keywords and c.name not in self.calls_named]
            self._uncalled_lines = bytearray(max((end for _, end in spans), default=-1) + 1)
            for start, end in spans:
                self._uncalled_lines[start:end + 1] = b"\1" * (end + 1 - start)
        return self._uncalled_lines

    def _unreferred(self, fn):
        """A function whose name nothing refers to (referred_names), and that no one else calls by its place:
        not decorated, not a dunder method, not a method of a class built on a class outside the program (a
        framework calls forward, __getitem__, on_train_epoch_end by name). Most functions are called by name
        (`f()`, `obj.f()`): that is read from the calls by name, before the names of the whole program."""
        if not self._not_called(fn):
            return False
        owner = self.parent.get(fn)
        if type(owner) is ast.ClassDef and self._framework_class(owner):
            return False
        return fn.name not in self.referred_names()

    def _unreferred_class(self, cls):
        """A class whose name nothing refers to (referred_names: no call builds it, no class is based on it, no
        import, no string names it), not decorated, without a metaclass, and not built on a class outside the
        program (a framework may build it): its methods never run, whatever calls them by name inside it
        (`self._resume_checkpoint()` in a trainer class that the entry point does not use)."""
        return not cls.decorator_list and not cls.keywords and cls.name not in self.calls_named and \
            not self._framework_class(cls) and cls.name not in self.referred_names() and self._file_in_use(cls)

    def _file_in_use(self, cls):
        """Whether the program visibly uses the file that defines cls, so that leaving cls out is its choice: the
        file runs something itself (its own entry point), or another file of its folder imports a name it
        defines (`from base import Multi_BaseTrainer_dist`, beside the BaseTrainer it leaves). A file that no file
        read uses (a trainer whose user is not in the folder) is a library read for a program the doctor does
        not see: its classes keep their findings."""
        if not hasattr(self, "_imported_here"):  # the names this file defines that a file of the folder imports
            imported = getattr(self.folder_call_names, "imported", frozenset())
            self._imported_here = {node.name for node in self.tree.body if type(node) in (
                ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef) and node.name in imported}
        return self._file_entry_point() or bool(self._imported_here - {cls.name})

    def _not_called(self, fn):
        """Not decorated, not a dunder, and called by name nowhere (`f()`, `obj.f()`, not `torch.f()`)."""
        name = fn.name
        if fn.decorator_list or name.startswith("__") and name.endswith("__"):
            return False
        external = self.external_modules()
        return not any(type(c.func) is ast.Name or not (type(c.func.value) is ast.Name and c.func.value.id in external)
                       for c in self.calls_named.get(name, ()) if type(c.func) in (ast.Name, ast.Attribute))

    def _framework_class(self, cls, depth=0):
        """Whether a class may be called by a framework: decorated, with a metaclass, or with a base that is not
        object nor a class of this file that is itself not one (a base from another file counts as one)."""
        if cls.decorator_list or cls.keywords or depth > 20:
            return True
        classes = self.classes()
        for base in cls.bases:
            name = dotted(base)
            if name == "object":
                continue
            local = classes.get(name)
            if local is None or local is cls or self._framework_class(local, depth + 1):
                return True
        return False

    def classes(self):
        """name -> the class of this file by that name (a name defined twice: neither)."""
        if not hasattr(self, "_classes"):
            found = {}
            for c in self.of_type(ast.ClassDef):
                found[c.name] = None if c.name in found else c
            self._classes = {name: c for name, c in found.items() if c is not None}
        return self._classes

    def referred_names(self):
        """Every name the program refers to other than by its own def: a name used (a call, a callback passed,
        stored in a dict), an attribute `.name` on anything but an imported module of outside the program
        (torch.save refers to no method save; utils.load, with utils a module of the folder, does), a string
        constant equal to it (getattr dispatch), a name imported; with the other files of its folder (driver)."""
        if not hasattr(self, "_referred"):
            external = self.external_modules()
            found = {n.id for n in self.of_type(ast.Name)}
            found.update(a.attr for a in self.of_type(ast.Attribute)
                         if type(a.value) is not ast.Name or a.value.id not in external)
            found.update(text for text in self.strings() if text.isidentifier())
            found.update(alias.name for node in self.of_type(ast.ImportFrom) for alias in node.names)
            self._referred = found | getattr(self.folder_call_names, "referred", frozenset())
        return self._referred

    def external_modules(self):
        """The names bound by an import from outside the program (`import torch`, `import torch.distributed as
        dist`, `from torch import nn`): not from a file or package of the folder read (driver), nor relative."""
        if hasattr(self, "_external"):
            return self._external
        ours = getattr(self.folder_call_names, "modules", frozenset())
        found = self._external = set()
        for node in self.of_type(ast.Import):
            found.update(alias.asname or alias.name.split(".")[0] for alias in node.names
                         if alias.name.split(".")[0] not in ours)
        for node in self.of_type(ast.ImportFrom):
            if not node.level and (node.module or "").split(".")[0] not in ours:
                found.update(alias.asname or alias.name for alias in node.names)
        return found

    def has_entry_point(self):
        """Whether the program runs something: an `if __name__ == "__main__":` or a module-level call (not of an
        imported module's function, not print), here or in a file of its folder (driver)."""
        return getattr(self.folder_call_names, "entry_point", False) or self._file_entry_point()

    def _file_entry_point(self):
        """Whether this file itself runs something (has_entry_point, without the other files of its folder)."""
        if not hasattr(self, "_entry_point"):
            external = self.external_modules()
            self._entry_point = False
            for statement in self.statements(None):
                if type(statement) is ast.If and "__name__" in names_in(statement.test):
                    self._entry_point = True
                    break
                value = statement.value.value if type(statement) is ast.Expr and type(
                    statement.value) is ast.Await else getattr(statement, "value", None)
                if type(statement) is ast.Expr and type(value) is ast.Call:
                    root = value.func
                    while type(root) is ast.Attribute:
                        root = root.value
                    if type(root) is ast.Name and root.id != "print" and not (
                            root is not value.func and root.id in external):
                        self._entry_point = True
                        break
        return self._entry_point


def assigned_values(statements, name):
    """The values assigned to a plain name in these statements (and the blocks inside them, not in functions)."""
    found = []
    todo = list(statements)
    while todo:
        node = todo.pop()
        if isinstance(node, SCOPES):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                found += [v for t, v in pairs(target, node.value) if isinstance(t, ast.Name) and t.id == name]
        elif isinstance(node, ast.AnnAssign) and node.value is not None and dotted(node.target) == name:
            found.append(node.value)
        if isinstance(node, ast.stmt):
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                todo.extend(getattr(node, field, None) or [])
        elif isinstance(node, (ast.ExceptHandler, ast.match_case)):
            todo.extend(node.body)
    return found


def pairs(target, value):
    """(target, value) pairs of an assignment, tuples unpacked where both sides are tuples."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) and \
            len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts):
            yield from pairs(t, v)
    else:
        yield target, value


EPOCHISH = re.compile("epoch", re.I)


def is_epoch_loop(loop):
    return text_mentions(loop.target, EPOCHISH) or (
        isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "range" and
        text_mentions(loop.iter, EPOCHISH))


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
