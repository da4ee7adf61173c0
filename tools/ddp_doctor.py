"""The DDP doctor: finds the classic mistakes of a DistributedDataParallel training script by reading it.

    python tools/ddp_doctor.py train.py                # one finding a line, then a summary
    python tools/ddp_doctor.py ddp_scripts notebooks   # folders: every .py file and every notebook in them
    python tools/ddp_doctor.py --explain DDP011        # why a rule exists, its fix, the lesson that teaches it
    python tools/ddp_doctor.py --list                  # every rule, one a line
    python tools/ddp_doctor.py --format json train.py  # for editors and CI

It never imports or runs what it checks (pure `ast`, no torch): a script with a hang or a GPU in it
is checked in milliseconds on a laptop. Each finding is printed the way linters print theirs,
`path:line:col: DDP### message`; in a notebook the place is `path.ipynb:cell N:line:col`, where N is
the cell's index in the notebook (0 = the first cell) and line counts from the cell's first line.
A notebook's code cells are read as one program, in order (lines starting with `!` or `%` and
other `%%` cells are skipped); a `%%writefile x.py` cell is read as the file it writes, on its own.

Exit code 0 when nothing was found, 1 when something was (a file that does not parse is reported as
DDP000 and counts), 2 on bad usage (no such file, a bad flag, an unknown code for --explain).

A lesson may keep a bug on purpose: `# ddp-doctor: ignore[DDP011] why` (several codes: `ignore[DDP005,DDP006]`)
on the finding's line, on the first line of its statement, or alone on the line just above that
statement silences it; the summary counts it as suppressed, and --show-suppressed prints it.

The rules prefer saying nothing to guessing: where a reader of the code cannot be sure (a loader
passed in as an argument, a function called from nowhere in the file), a rule stays silent, and
--explain says where a rule is conservative.

Written for notebooks/14_ddp_doctor.ipynb, which teaches it.
"""

import argparse
import ast
import json
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

# ---------------------------------------------------------------------------------------------------
# The rules, in one table: code -> (name, message, why, fix, lesson). The codes are stable.

RULES = {
    "DDP000": ("syntax-error", "cannot parse this file: {detail}",
               "The doctor reads code with Python's own parser; a file it cannot parse is not checked at all.",
               "Fix the syntax error (python -m py_compile FILE says the same).",
               "-"),
    "DDP001": ("global-rank-as-device", "{detail} is the global rank (get_rank() / RANK), used as a device index: "
               "use LOCAL_RANK",
               "get_rank() and RANK number the processes of the whole job. On a second machine they go on "
               "from where the first machine stopped (8, 9, ...), so cuda:RANK names a GPU that does not exist "
               "('invalid device ordinal'). The device index on a machine is the local rank.",
               "local_rank = int(os.environ['LOCAL_RANK']); torch.cuda.set_device(local_rank). Conservative: "
               "only a name assigned from get_rank() / RANK in the same function, or the call itself, used "
               "directly as a device index (set_device, torch.device('cuda', i), f'cuda:{i}', .cuda(i), "
               "device_ids=[i], .to(i)).",
               "02 · Processes, ranks and world size; 04 · From single device to DDP"),
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
    "DDP005": ("unguarded-save", "torch.save() runs on every rank: guard it with `if rank == 0:`",
               "Every process runs the whole script. N processes writing one file at once can leave a mix "
               "of them, or a file cut short when one process replaces another's half-written copy.",
               "if dist.get_rank() == 0: save ...; then dist.barrier() so nobody reads it too early. "
               "Conservative: a save inside a function counts as guarded when every call of that function "
               "in the file is guarded, or when the file never calls it.",
               "05 · Rank-aware training"),
    "DDP006": ("unguarded-log", "every rank logs this line: guard it with `if rank == 0:` or say the rank",
               "Every process runs the loop, so an unguarded print or log call appears N times, each copy "
               "with only that rank's numbers, and the lines of N processes run into each other.",
               "Log from rank 0 (with numbers all-reduced over the ranks), or prefix a deliberate per-rank "
               "line with its rank. Conservative: only prints and logging calls inside a loop over epochs or "
               "batches, not to stderr, and not mentioning a rank.",
               "04 · From single device to DDP; 05 · Rank-aware training"),
    "DDP007": ("non-atomic-checkpoint", "checkpoint written in place: write a temporary file, then os.replace()",
               "A job can be killed at any moment (preemption, a timeout, a crash on another rank). Killed "
               "inside torch.save, it leaves half a checkpoint under the real name, and the next run cannot "
               "resume at all.",
               "torch.save(state, tmp); os.replace(tmp, path): a rename is atomic, so the file is either the "
               "old one or the new one. Checked: torch.save of something that looks like a checkpoint (a "
               "state_dict, a name with state/checkpoint/ckpt/snapshot) in a function with no rename.",
               "05 · Rank-aware training; 08 · Fault tolerance"),
    "DDP008": ("load-without-map-location", "torch.load() without map_location in a DDP script",
               "A checkpoint remembers the device its tensors were saved from (cuda:0 on rank 0). Loaded "
               "without map_location, every rank puts its copy on GPU 0: memory there runs out, and the "
               "other ranks' tensors sit on the wrong device.",
               "torch.load(path, map_location='cpu', weights_only=True) (load_state_dict then copies to the "
               "model's device), or map_location=device.",
               "05 · Rank-aware training"),
    "DDP009": ("load-weights-only-false", "torch.load(..., weights_only=False) runs whatever code the file holds",
               "torch.load unpickles: with weights_only=False a crafted file can run any code on every rank "
               "of the job. A checkpoint of tensors, numbers and dicts needs none of that.",
               "torch.load(path, map_location='cpu', weights_only=True); save only tensors, numbers, "
               "strings, lists and dicts.",
               "05 · Rank-aware training"),
    "DDP010": ("saved-module-prefix", "{detail}.state_dict() saved: its keys start with 'module.'; "
               "save {detail}.module.state_dict()",
               "DDP wraps the model: the wrapper's state_dict() names every weight 'module.<name>'. A model "
               "without DDP (evaluation, a single-GPU run, another script) then cannot load the file "
               "('Missing key(s) ... Unexpected key(s) module.').",
               "Save ddp_model.module.state_dict() (or the unwrapped model's state_dict()).",
               "05 · Rank-aware training"),
    "DDP011": ("collective-in-rank-branch", "{detail} inside a branch that only some ranks take: the others "
               "never join it (the classic hang)",
               "A collective (all_reduce, barrier, broadcast, ...) completes only when every rank calls it, "
               "and a forward pass through the DDP model can start one. Under `if rank == 0:` rank 0 waits "
               "for ranks that never come, until the timeout ends the job.",
               "Call the collective on every rank, outside the branch, and keep only the rank-0 work (print, "
               "save) inside it. Checked: dist collectives, the DDP model's forward, and functions of the "
               "same file that call them; silent when the other branch calls a collective too.",
               "05 · Rank-aware training; 09 · Debugging"),
    "DDP012": ("nccl-hard-coded", "init_process_group('nccl') hard-coded: no CPU path",
               "NCCL runs only on CUDA GPUs. A script that names it outright fails on a laptop, in CI and on "
               "any machine without a GPU, and cannot be tried out small before the real run.",
               "backend = 'nccl' if torch.cuda.is_available() else 'gloo' (lesson 04's choose_device). "
               "Silent when the call sits under an `if` that asks about CUDA.",
               "04 · From single device to DDP"),
    "DDP013": ("cuda-visible-devices-in-script", "CUDA_VISIBLE_DEVICES set inside the script",
               "By the time the script runs, the launcher has already decided which processes run; setting "
               "the variable in Python works only if nothing has touched CUDA yet, and then it renumbers the "
               "GPUs under LOCAL_RANK, so local rank 1 may see one GPU or none.",
               "Choose GPUs outside the script: CUDA_VISIBLE_DEVICES=0,2 torchrun --nproc_per_node=2 train.py.",
               "04 · From single device to DDP"),
    "DDP014": ("legacy-local-rank-argument", "{detail} as an argparse option: the legacy launcher's way",
               "torch.distributed.launch passed --local_rank (since torch 2.0 --local-rank) on the command "
               "line; torchrun passes nothing and sets LOCAL_RANK. Under torchrun the option keeps its "
               "default (every process on GPU 0); under launch one spelling is 'unrecognized arguments'.",
               "local_rank = int(os.environ['LOCAL_RANK']). Silent when the option's default reads LOCAL_RANK "
               "(the compatible form lesson 04 shows).",
               "04 · From single device to DDP"),
    "DDP015": ("no-sync-around-backward-only", "no_sync() around backward() only: the forward pass must be "
               "inside it too",
               "DDP decides in the forward pass whether the next backward all-reduces. A forward outside "
               "no_sync() has already armed the all-reduce, so the gradients are synchronised at every "
               "micro-step anyway: no_sync() saves nothing.",
               "with ddp_model.no_sync(): loss = loss_fn(ddp_model(x), y); loss.backward(). Checked: a "
               "no_sync() block that calls backward() but never uses the model it was taken from.",
               "07 · Performance"),
    "DDP016": ("accumulation-without-no-sync", "gradient accumulation in a DDP script without no_sync(): "
               "every micro-step all-reduces",
               "With accumulation the optimizer steps every k micro-steps, but DDP all-reduces the gradients "
               "at every backward(): k times the communication for the same result.",
               "Run the micro-steps before the last inside `with ddp_model.no_sync():` (forward and "
               "backward). Checked: an `if ... % k` that calls .step() in a loop that calls backward(), in a "
               "file that uses DDP and never no_sync().",
               "07 · Performance"),
    "DDP017": ("unreduced-logged-loss", "a loss is logged ({detail}) that is never all-reduced: it is this "
               "rank's shard only",
               "Each rank computes the loss of its own shard. Printed as it is, rank 0's loss describes 1/N "
               "of the data, not the model's loss; each rank would print a different number.",
               "Sum loss * batch and the sample counts over the ranks (dist.all_reduce, lesson 05's "
               "sum_over_ranks) and log the quotient. Conservative: silent when the function passes the value "
               "to any reduce, gather or all_reduce call.",
               "05 · Rank-aware training"),
    "DDP018": ("padded-evaluation", "DistributedSampler over an evaluation set repeats samples when its size "
               "does not divide by the world size: a metric summed over the shards is not exact",
               "DistributedSampler repeats samples until every rank has the same number (drop_last=False), "
               "so with a size that does not divide by the world size the summed counts include duplicates: "
               "the metric is close, not exact.",
               "Shard without padding (rank r takes r, r + N, ...) and sum the counts, or gather (index, "
               "result) and count each index once. Conservative: only a sampler over a dataset named "
               "val/test/eval, without drop_last=True, in a file that gathers nothing.",
               "05 · Rank-aware training"),
    "DDP019": ("softmax-into-cross-entropy", "{detail} fed into CrossEntropyLoss, which applies log_softmax itself",
               "CrossEntropyLoss takes raw logits. After a Softmax the loss can never go below "
               "log(1 + (C-1)/e) (1.46 for 10 classes) and the gradients shrink: training slows or freezes. "
               "A log_softmax before it is redundant (harmless, but NLLLoss was meant).",
               "Return the logits from forward(); apply softmax only to report probabilities. Checked: a "
               "model whose forward() returns a softmax / log_softmax, or such a call passed straight to the "
               "loss, in a file that uses CrossEntropyLoss.",
               "01 · The single-device baseline"),
    "DDP020": ("resume-repeats-epoch", "the resumed run restarts at the epoch the checkpoint stored as finished: "
               "that epoch runs twice",
               "The checkpoint is written after epoch E is done and stores E; the resume starts range(E, ...), "
               "so epoch E is trained a second time (and its sampler order repeats).",
               "Start at checkpoint['epoch'] + 1, or store epoch + 1 ('the next epoch') and say so in the "
               "key's name. Conservative: only when the file stores the loop's epoch as it is and starts a "
               "range() from the loaded value as it is.",
               "05 · Rank-aware training; 08 · Fault tolerance"),
}

COLLECTIVES = {"all_reduce", "barrier", "broadcast", "all_gather", "all_gather_into_tensor", "all_gather_object",
               "reduce", "gather", "gather_object", "scatter", "scatter_object_list", "reduce_scatter",
               "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast_object_list",
               "monitored_barrier"}
SOFTMAXES = {"softmax", "log_softmax", "Softmax", "LogSoftmax"}
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
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


# ---------------------------------------------------------------------------------------------------
# The rules: each takes a Module and yields (node, code, detail)


def is_global_rank(node, global_ranks):
    """The global rank itself: a name bound to it in this scope, or the call that reads it."""
    return (isinstance(node, ast.Name) and node.id in global_ranks) or is_global_rank_expr(node)


def device_indices(call):
    """The arguments of a call that name a device index: set_device(i), torch.device("cuda", i), .cuda(i),
    .to(i), device_ids=[i]."""
    name, found = dotted(call.func), []
    if name.endswith("cuda.set_device") and call.args:
        found = [call.args[0]]
    elif name in ("torch.device", "device") and len(call.args) == 2 and is_const(call.args[0], "cuda"):
        found = [call.args[1]]
    elif last_name(call) in ("cuda", "to") and isinstance(call.func, ast.Attribute) and len(call.args) == 1 \
            and not name.startswith("torch."):
        found = [call.args[0]]
    ids = keyword(call, "device_ids")
    if isinstance(ids, (ast.List, ast.Tuple)):
        found += ids.elts
    return found


def rule_global_rank_as_device(m):
    """DDP001: a global rank used as a device index."""
    for call in m.calls:
        global_ranks = m.bound_to(m.scope(call), is_global_rank_expr)
        for index in device_indices(call):
            if is_global_rank(index, global_ranks):
                yield index, "DDP001", ast.unparse(index)
    for node in m.nodes:  # f"cuda:{rank}"
        if isinstance(node, ast.JoinedStr):
            for before, value in zip(node.values, node.values[1:]):
                if isinstance(before, ast.Constant) and str(before.value).endswith("cuda:") and \
                        isinstance(value, ast.FormattedValue) and \
                        is_global_rank(value.value, m.bound_to(m.scope(node), is_global_rank_expr)):
                    yield value.value, "DDP001", ast.unparse(value.value)


def distributed_samplers(m):
    return [c for c in m.calls if last_name(c) == "DistributedSampler"]


def rule_sampler_without_set_epoch(m):
    """DDP002: a shuffling DistributedSampler, an epoch loop, and no set_epoch anywhere."""
    if "set_epoch" in m.call_names or not m.epoch_loops():
        return
    evalish = re.compile(r"val|test|eval", re.I)
    for call in distributed_samplers(m):
        data = call.args[0] if call.args else keyword(call, "dataset")
        if not is_const(keyword(call, "shuffle"), False) and not (data is not None and text_mentions(data, evalish)):
            yield call, "DDP002", ""


def rule_shuffle_with_sampler(m):
    """DDP003: DataLoader(..., sampler=..., shuffle=True)."""
    for call in m.calls:
        if last_name(call) == "DataLoader" and is_const(keyword(call, "shuffle"), True):
            sampler = keyword(call, "sampler")
            if sampler is not None and not is_const(sampler, None):
                yield keyword(call, "shuffle"), "DDP003", ""


def rule_ddp_loader_without_sampler(m):
    """DDP004: in a DDP file, the loader a backward() loop iterates has no sampler."""
    if not m.uses_ddp:
        return
    for loop in m.nodes:
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or "backward" not in {last_name(c) for c in calls_in(loop)}:
            continue
        it = loop.iter.args[0] if isinstance(loop.iter, ast.Call) and last_name(loop.iter) == "enumerate" \
            and loop.iter.args else loop.iter
        if not isinstance(it, ast.Name):
            continue
        loaders = m.bound_to(m.scope(loop), lambda v: isinstance(v, ast.Call) and last_name(v) == "DataLoader")
        call = loaders.get(it.id)
        if call is None or keyword(call, "sampler") is not None or keyword(call, "batch_sampler") is not None:
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
    classes = [n for n in m.nodes if isinstance(n, ast.ClassDef) and n.name == name]
    methods = {f.name for c in classes for f in c.body if isinstance(f, ast.FunctionDef)}
    return bool(classes) and "__getitem__" in methods and "__iter__" not in methods


def rule_unguarded_save(m):
    """DDP005: torch.save on every rank of a DDP script."""
    if not m.is_distributed:
        return
    for call in m.calls:
        if dotted(call.func) == "torch.save" and not m.guarded(call) and not m.mentions_rank(call):
            yield call, "DDP005", ""  # (a path that names the rank is a file per rank, on purpose)


def rule_unguarded_log(m):
    """DDP006: print / logging inside an epoch or batch loop, with no rank guard and no rank in the text."""
    if not m.is_distributed:
        return
    loaders = set()
    for scope in [None, *[d for defs in m.functions.values() for d in defs]]:
        loaders |= set(m.bound_to(scope, lambda v: isinstance(v, ast.Call) and last_name(v) == "DataLoader"))
    for call in m.calls:
        if not is_log_call(call) or m.guarded(call) or m.mentions_rank(call) or \
                text_mentions(call, re.compile(r"device|gpu|hostname|pid|node", re.I)):
            continue  # guarded, or a line that says which process it comes from
        file = keyword(call, "file")
        if file is not None and "stderr" in ast.unparse(file):
            continue
        in_loop = False
        for a in m.ancestors(call):
            if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                break
            if isinstance(a, (ast.For, ast.AsyncFor)) and (is_epoch_loop(a) or is_batch_loop(a, loaders)):
                in_loop = True
        if in_loop:
            yield call, "DDP006", ""


CHECKPOINTISH = re.compile(r"state|checkpoint|ckpt|snapshot", re.I)


def rule_non_atomic_checkpoint(m):
    """DDP007: torch.save of a checkpoint in a function that renames nothing, in a DDP script."""
    if not m.is_distributed:
        return
    for call in m.calls:
        if dotted(call.func) != "torch.save" or len(call.args) < 1:
            continue
        obj = call.args[0]
        looks = "state_dict" in {last_name(c) for c in calls_in(obj)} or text_mentions(obj, CHECKPOINTISH) or (
            len(call.args) > 1 and text_mentions(call.args[1], CHECKPOINTISH))
        if not looks:
            continue
        target = call.args[1] if len(call.args) > 1 else keyword(call, "f")
        if target is not None and re.search(r"BytesIO|tmp|temp|partial", ast.unparse(target), re.I):
            continue  # a buffer, or a temporary file that some other line renames
        scope = m.scope(call)
        nodes = m.scope_nodes(scope)
        renames = [n for n in nodes if isinstance(n, ast.Call) and last_name(n) in ("replace", "rename")
                   and (dotted(n.func).startswith("os.") or len(n.args) == 1)]
        if target is not None and isinstance(target, ast.Name):
            buffers = m.bound_to(scope, lambda v: "BytesIO" in ast.unparse(v))
            if target.id in buffers:
                continue
        if not renames:
            yield call, "DDP007", ""


def rule_torch_load(m):
    """DDP008 (no map_location, in a DDP script) and DDP009 (weights_only=False)."""
    for call in m.calls:
        if dotted(call.func) not in ("torch.load",):
            continue
        if any(k.arg is None for k in call.keywords):
            continue  # **kwargs: cannot say
        if is_const(keyword(call, "weights_only"), False):
            yield keyword(call, "weights_only"), "DDP009", ""
        if m.is_distributed and keyword(call, "map_location") is None and len(call.args) < 2:
            yield call, "DDP008", ""


def rule_saved_module_prefix(m):
    """DDP010: torch.save of ddp_model.state_dict()."""
    for save in m.calls:
        if dotted(save.func) != "torch.save" or not save.args:
            continue
        scope = m.scope(save)
        ddp = m.ddp_names(scope, before=save)
        saved = [save.args[0]]
        if isinstance(save.args[0], ast.Name):  # state = {...}; torch.save(state, path)
            saved += [v for name, v in m.bound_to(scope, lambda v: True).items() if name == save.args[0].id]
        for expr in saved:
            for c in calls_in(expr):
                if last_name(c) == "state_dict" and isinstance(c.func, ast.Attribute) and \
                        dotted(c.func.value) in ddp:
                    yield c, "DDP010", dotted(c.func.value)


def rule_collective_in_rank_branch(m):
    """DDP011: a collective, a DDP forward or a function that calls one, under `if rank == 0:`."""
    for call in m.calls:
        scope = m.scope(call)
        name = last_name(call)
        if m.is_collective(call):
            what = f"dist.{name}()"
        elif isinstance(call.func, ast.Name) and name in m.collective_functions:
            what = f"{name}(), which calls a collective,"
        elif dotted(call.func) in m.ddp_names(scope, before=call):
            what = f"a forward pass through the DDP model {dotted(call.func)}"
        else:
            continue
        loop_vars = {dotted(a.target) for a in m.ancestors(call) if isinstance(a, (ast.For, ast.AsyncFor))} - {""}
        for branch, in_body in m.enclosing_ifs(call):
            if isinstance(branch, ast.If) and is_rank_test(branch.test, m.rank_aliases):
                if names_in(branch.test) & loop_vars:
                    break  # `for rank in range(world_size): if rank == me:` every rank takes it in turn
                other = branch.orelse if in_body else branch.body
                ddp = m.ddp_names(scope)
                if not any(m.is_collective(c) or last_name(c) in m.collective_functions or dotted(c.func) in ddp
                           for s in other for c in calls_in(s)):  # the other ranks call one too: no finding
                    yield call, "DDP011", what
                break


def rule_nccl_hard_coded(m):
    """DDP012: init_process_group("nccl") with no CPU alternative around it."""
    if any(isinstance(n, ast.Constant) and n.value == "gloo" for n in m.nodes):
        return  # the file has a CPU path somewhere
    for call in m.calls:
        if last_name(call) != "init_process_group":
            continue
        backend = call.args[0] if call.args else keyword(call, "backend")
        if not (isinstance(backend, ast.Constant) and isinstance(backend.value, str) and
                backend.value.lower().startswith("nccl")):
            continue
        if any(text_mentions(a.test, re.compile(r"cuda|is_available|gpu|device|backend", re.I))
               for a, _ in m.enclosing_ifs(call)):
            continue
        yield backend, "DDP012", ""


def rule_cuda_visible_devices(m):
    """DDP013: os.environ["CUDA_VISIBLE_DEVICES"] = ... (or setdefault / update / putenv) in the script."""
    for node in m.nodes:
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Subscript) and dotted(target.value).endswith("environ") and \
                        is_const(target.slice, "CUDA_VISIBLE_DEVICES"):
                    yield target, "DDP013", ""
        elif isinstance(node, ast.Call):
            name = dotted(node.func)
            if name.endswith(("environ.setdefault", "putenv")) and node.args and \
                    is_const(node.args[0], "CUDA_VISIBLE_DEVICES"):
                yield node, "DDP013", ""
            elif name.endswith("environ.update") and any(k.arg == "CUDA_VISIBLE_DEVICES" for k in node.keywords):
                yield node, "DDP013", ""


def rule_legacy_local_rank_argument(m):
    """DDP014: parser.add_argument("--local_rank") whose default does not come from LOCAL_RANK."""
    for call in m.calls:
        if last_name(call) != "add_argument":
            continue
        flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        legacy = [f for f in flags if f in ("--local_rank", "--local-rank")]
        if not legacy:
            continue
        default = keyword(call, "default")
        if default is not None and text_mentions(default, re.compile(r"^LOCAL_RANK$")):
            continue
        yield call, "DDP014", legacy[0]


def rule_no_sync_around_backward_only(m):
    """DDP015: with model.no_sync(): ... backward() ..., and the model never used inside."""
    for node in m.nodes:
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            continue
        for item in node.items:
            ctx = item.context_expr
            if not (isinstance(ctx, ast.Call) and last_name(ctx) == "no_sync" and isinstance(ctx.func, ast.Attribute)):
                continue
            model = dotted(ctx.func.value)
            body_calls = [c for s in node.body for c in calls_in(s)]
            if not model or "backward" not in {last_name(c) for c in body_calls}:
                continue
            uses_model = any(dotted(c.func) == model or dotted(c.func).startswith(model + ".") or
                             any(dotted(a) == model for a in [*c.args, *(k.value for k in c.keywords)])
                             for c in body_calls)
            if not uses_model:
                yield ctx, "DDP015", ""


def rule_accumulation_without_no_sync(m):
    """DDP016: `if ... % k ...: optimizer.step()` in a backward() loop of a DDP file without no_sync."""
    if not m.uses_ddp or "no_sync" in m.call_names or any(
            isinstance(n, ast.Attribute) and n.attr == "require_backward_grad_sync" for n in m.nodes):
        return  # no_sync() somewhere, or the switch it sets, set by hand (nanoGPT's way)
    for loop in m.nodes:
        if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
            continue
        if "backward" not in {last_name(c) for s in loop.body for c in calls_in(s)}:
            continue
        for node in ast.walk(loop):
            if isinstance(node, ast.If) and any(isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mod)
                                                for b in ast.walk(node.test)):
                if any(last_name(c) == "step" and isinstance(c.func, ast.Attribute) and not c.args
                       for s in node.body for c in calls_in(s)):
                    yield node, "DDP016", ""
                    return


REDUCERS = re.compile(r"reduce|gather|over_ranks|all_|mean_over|average", re.I)


LOSS_CALL = re.compile(r"loss|criterion|cross_entropy|nll|mse|bce|l1|kl_div|ctc|margin", re.I)


def loss_names(m, scope):
    """Names that a loss computation assigns in this scope: loss = loss_fn(logits, y), loss = criterion(...) / k."""
    return {name for name, value in m.assignments(scope) if isinstance(value, (ast.Call, ast.BinOp)) and
            any(LOSS_CALL.search(last_name(c)) and not REDUCERS.search(last_name(c)) for c in calls_in(value))}


def rule_unreduced_logged_loss(m):
    """DDP017: a print of loss.item() (or of a sum of them) that no collective ever saw."""
    if not m.is_distributed:
        return
    for call in m.calls:
        if not is_log_call(call):
            continue
        scope = m.scope(call)
        nodes = m.scope_nodes(scope)
        losses = loss_names(m, scope)  # computed here: a parameter may hold a loss reduced by the caller
        if not losses:
            continue
        reduced = set()
        for c in nodes:
            if isinstance(c, ast.Call) and REDUCERS.search(last_name(c)):
                reduced |= names_in(c)
        for n in nodes:  # x = ... reduced ...: x is reduced too
            if isinstance(n, ast.Assign) and any(REDUCERS.search(last_name(c)) for c in calls_in(n.value)):
                for t in n.targets:
                    reduced |= names_in(t)
        accumulators = {n.target.id for n in nodes if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
                        and any(last_name(c) == "item" and names_in(c) & losses for c in calls_in(n.value))}
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            for c in calls_in(arg):
                if last_name(c) == "item" and isinstance(c.func, ast.Attribute) and \
                        isinstance(c.func.value, ast.Name) and c.func.value.id in losses - reduced:
                    yield c, "DDP017", ast.unparse(c)
            for name in names_in(arg) & accumulators - reduced:
                yield arg, "DDP017", name


def rule_padded_evaluation(m):
    """DDP018: DistributedSampler(val_set) with padding, in a function that gathers nothing."""
    evalish = re.compile(r"val|test|eval|valid", re.I)
    for call in distributed_samplers(m):
        data = call.args[0] if call.args else keyword(call, "dataset")
        if data is None or not text_mentions(data, evalish) or is_const(keyword(call, "drop_last"), True):
            continue
        if any("gather" in name for name in m.call_names):
            continue  # the file gathers results: it may count each index once
        yield call, "DDP018", ""


def returned_softmax(m, fn):
    """The softmax call that forward() returns, or None: `return self.softmax(x)`, `return F.softmax(x)`,
    `out = self.softmax(x); return out`, where self.softmax = nn.Softmax(...) in __init__."""
    cls = m.parent.get(fn)
    softmax_attrs = set()
    if isinstance(cls, ast.ClassDef):
        for node in ast.walk(cls):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    last_name(node.value) in SOFTMAXES:
                softmax_attrs |= {dotted(t) for t in node.targets}
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                    last_name(node.value) == "Sequential" and node.value.args and \
                    last_name(node.value.args[-1]) in SOFTMAXES:
                softmax_attrs |= {"seq:" + dotted(t) for t in node.targets}
    assigned = {}
    for node in m.scope_nodes(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value

    def softmax_of(expr, depth=0):
        if isinstance(expr, ast.Name) and expr.id in assigned and depth < 3:
            return softmax_of(assigned[expr.id], depth + 1)
        if isinstance(expr, ast.Call):
            if last_name(expr) in SOFTMAXES or dotted(expr.func) in softmax_attrs or \
                    ("seq:" + dotted(expr.func)) in softmax_attrs:
                return expr
            if isinstance(expr.func, ast.Attribute) and expr.func.attr in SOFTMAXES:  # x.softmax(1)
                return expr
        return None

    returns = [n for n in m.scope_nodes(fn) if isinstance(n, ast.Return) and n.value is not None]
    found = [softmax_of(r.value) for r in returns]
    return found[0] if found and all(found) else None


def softmax_kind(call):
    return "log_softmax" if "log" in last_name(call).lower() else "Softmax"


def rule_softmax_into_cross_entropy(m):
    """DDP019: a model whose forward() returns a softmax, or cross_entropy(softmax(x), y), in a file with
    CrossEntropyLoss."""
    if not ({"CrossEntropyLoss", "cross_entropy"} & m.call_names):
        return
    nll = "NLLLoss" in m.call_names or "nll_loss" in m.call_names
    for defs in m.functions.values():
        for fn in defs:
            if fn.name == "forward" and isinstance(m.parent.get(fn), ast.ClassDef):
                call = returned_softmax(m, fn)
                if call is not None:
                    kind = softmax_kind(call)
                    if not (kind == "log_softmax" and nll):
                        yield call, "DDP019", f"a {kind} at the end of forward() is"
    loss_fns = set()
    for scope in [None, *[d for defs in m.functions.values() for d in defs]]:
        loss_fns |= set(m.bound_to(scope, lambda v: isinstance(v, ast.Call) and last_name(v) == "CrossEntropyLoss"))
    for call in m.calls:
        if (last_name(call) == "cross_entropy" or dotted(call.func) in loss_fns) and call.args:
            first = call.args[0]
            if isinstance(first, ast.Call) and (last_name(first) in SOFTMAXES):
                yield first, "DDP019", f"a {softmax_kind(first)}"


def rule_resume_repeats_epoch(m):
    """DDP020: the file stores the epoch loop's variable as it is (the finished epoch), and starts a
    range() at a value read from a checkpoint's epoch entry as it is (no + 1)."""
    epochish = re.compile("epoch", re.I)
    loop_vars = {dotted(loop.target) for loop in m.epoch_loops()} - {""}

    def epoch_key(key):
        return isinstance(key, ast.Constant) and isinstance(key.value, str) and epochish.search(key.value)

    def finished_epoch(value):  # the loop variable itself (or a parameter of the same name), not epoch + 1
        return isinstance(value, ast.Name) and value.id in loop_vars

    stored = set()  # the keys under which the finished epoch is stored
    for node in m.nodes:
        if isinstance(node, ast.Dict):
            stored |= {k.value for k, v in zip(node.keys, node.values) if epoch_key(k) and finished_epoch(v)}
        elif isinstance(node, ast.Call) and dotted(node.func) == "dict":
            stored |= {k.arg for k in node.keywords if k.arg and epochish.search(k.arg) and finished_epoch(k.value)}
        elif isinstance(node, ast.Assign) and finished_epoch(node.value):
            stored |= {t.slice.value for t in node.targets if isinstance(t, ast.Subscript) and epoch_key(t.slice)}
    if not stored:
        return

    def loaded_epoch(expr):  # checkpoint["epoch"], under a key that stores a finished epoch
        return isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and expr.slice.value in stored

    from_checkpoint = {name for scope in [None, *m.functions_flat()]
                       for name, value in m.assignments(scope) if loaded_epoch(value)}
    for loop in m.epoch_loops():
        it = loop.iter
        if isinstance(it, ast.Call) and last_name(it) == "range" and len(it.args) >= 2:
            start = it.args[0]
            if loaded_epoch(start) or dotted(start) in from_checkpoint:
                yield start, "DDP020", ""


RULE_FUNCTIONS = [rule_global_rank_as_device, rule_sampler_without_set_epoch, rule_shuffle_with_sampler,
                  rule_ddp_loader_without_sampler, rule_unguarded_save, rule_unguarded_log,
                  rule_non_atomic_checkpoint, rule_torch_load, rule_saved_module_prefix,
                  rule_collective_in_rank_branch, rule_nccl_hard_coded, rule_cuda_visible_devices,
                  rule_legacy_local_rank_argument, rule_no_sync_around_backward_only,
                  rule_accumulation_without_no_sync, rule_unreduced_logged_loss, rule_padded_evaluation,
                  rule_softmax_into_cross_entropy, rule_resume_repeats_epoch]


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
    parser = argparse.ArgumentParser(prog="ddp_doctor.py", description=__doc__.split("\n\n")[0])
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
