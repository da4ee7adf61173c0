"""Saving and loading: who writes, how, what the file holds, where a resume starts.

Each rule_* function takes a program.Module and yields (node, code, detail); RULES holds its codes:
code -> (name, message, why, fix, lesson)."""

import ast
import re
from operator import attrgetter

from ..program import calls_in, dotted, is_const, keyword, last_name, text_mentions, unparse, walk
from .sync import parameters, passed_constant, reached

RULES = {
    "DDP005": ("unguarded-save", "torch.save() runs on every rank: guard it with `if rank == 0:`",
               "Every process runs the whole script. N processes writing one file at once can leave a mix "
               "of them, or a file cut short when one process replaces another's half-written copy.",
               "if dist.get_rank() == 0: save ...; then dist.barrier() so nobody reads it too early. "
               "Conservative: a save inside a function counts as guarded when every call of that function "
               "in the file is guarded, or when the file never calls it, or when its unguarded calls all pass "
               "constants that skip the save (`save_cur=True` for a save under the `elif` of `if save_cur:`; "
               "`if p:`, `if not p:`, p given True, False or None by keyword, by position or by its default: a "
               "helper read with its call's arguments, as for DDP011). In a file that forms the group "
               "(init_process_group), silent in a function that runs in one process: one the file reaches only "
               "from points that no group-forming call precedes (a command of the dispatch beside `train`, in "
               "another `elif`). A guard is a test that names a rank, or a name assigned from one (self.X set in "
               "__init__ from a parameter that every construction of the class passes a rank, too), or a call of "
               "a helper of the file or its folder that returns a rank test, whatever its name (`def "
               "is_first_worker(): return not dist.is_initialized() or dist.get_rank() == 0`), or the side "
               "of `if x is not None:` (`if x:`, after `if x is None: continue`) where x holds what a function of "
               "the file returns only under a rank test, None elsewhere (`return measures` under `if gpu == "
               "0:`), or a flag that holds a rank test: assigned only True and False, True only under a rank "
               "test (`main = False; if rank == 0: main = True`), or an attribute that every file of the folder "
               "sets so (`opt.log = True` under `if opt.rank == 0:`, False elsewhere). Silent on the side of a "
               "\"distributed or not\" test that runs in one process (the `else` of `if ddp:`, `if "
               "args.distributed:`, `if world_size > 1:`, `if dist.is_initialized():`; the body of `if not "
               "ddp:`), and for a path that names the rank or is new in each process (uuid4, os.getpid(), "
               "tempfile): a file per process, on purpose.",
               "05 · Rank-aware training"),
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
               "model's device), or map_location=device. Reported only for a load of a file that the program "
               "itself writes from a state_dict() it does not move to the CPU, wherever the model lives: a "
               "state_dict() of a model, an optimizer or the DDP wrapper saved (in the file or another file of "
               "its folder), read back by "
               "the same path expression or file name (`checkpoint.pth`, `epoch_{}.pth`; a `with open(p) as f` "
               "file stands for p; two paths built from one `args` or one folder are not one file), or loaded into "
               "load_state_dict of an object whose state_dict it saves. Files the program does not write "
               "(pretrained weights, embeddings from elsewhere) and files that hold no tensors (a scheduler's "
               "state, cached Python objects) are not reported at any level: their device is not visible in "
               "the code; nor a file whose saves hold only random-number states (torch.get_rng_state(), "
               "torch.cuda.get_rng_state() / get_rng_state_all(), np.random.get_state(), random.getstate(): CPU "
               "tensors wherever the generator runs). Like every rule, silent in a method of a class that nothing "
               "in the program refers to, in a file it visibly uses (a trainer class beside the one the entry "
               "point builds). Silent too for a load inside a rank test (one rank "
               "loads, DDP broadcasts its weights), for one before init_process_group in the same function or "
               "in a function that runs in one process (as for DDP005), "
               "for one whose `if` passes map_location in its other branch (a choice made per branch), and for "
               "one under `if flag:` where flag is a parameter that defaults to False and that no call in the "
               "file passes (code the script never runs), and when every torch.save in sight (no other file of "
               "the folder saves) saves tensors moved to the CPU (`.cpu()`, `.to('cpu')`), or an optimizer's "
               "state: a CPU tensor loads onto the CPU.",
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
               "('Missing key(s) ... Unexpected key(s) module.'). It bites only where such a reader loads the "
               "file into a plain model as it is, which is why this is advice: a resume that loads the file "
               "back into the DDP model, and a reader that wraps the model first (DataParallel, DDP) or strips "
               "the prefix (consume_prefix_in_state_dict_if_present), load it fine.",
               "Save ddp_model.module.state_dict() (or the unwrapped model's state_dict()). Silent for a file "
               "that loads its checkpoints back into the DDP model and saves the weights unwrapped as well "
               "(ddp_model.module.state_dict()): the 'module.' keys then never leave the script.",
               "05 · Rank-aware training"),
    "DDP020": ("resume-repeats-epoch", "the resumed run restarts at the epoch the checkpoint stored as finished: "
               "that epoch runs twice",
               "The checkpoint is written after epoch E is done and stores E; the resume starts range(E, ...), "
               "so epoch E is trained a second time (and its sampler order repeats).",
               "Start at checkpoint['epoch'] + 1, or store epoch + 1 ('the next epoch') and say so in the "
               "key's name. Conservative: only when the file stores the loop's epoch as it is and starts a "
               "range() from the loaded value as it is; silent for a checkpoint written inside the epoch (in a loop "
               "nested in the epoch loop, or in a loop of a function only the epoch loop calls) that stores "
               "beside the epoch where in it to restart (that loop's variable, or a start/step/batch/group "
               "key): the epoch in progress, not a finished one.",
               "05 · Rank-aware training; 08 · Fault tolerance"),
    "DDP021": ("zero-state-not-consolidated", "{detail}.state_dict() of a ZeroRedundancyOptimizer that nothing "
               "consolidates: it raises on every rank",
               "ZeroRedundancyOptimizer shards the optimizer state: each rank holds its share. state_dict() "
               "needs the whole state on the calling rank and raises RuntimeError ('Optimizer state has not "
               "been consolidated on this rank') unless consolidate_state_dict(to=rank) ran first, on every "
               "rank, since it is a collective.",
               "On every rank: optimizer.consolidate_state_dict(to=0); then, on rank 0 only, save "
               "optimizer.state_dict(). Conservative: silent when the file (or its folder) calls "
               "consolidate_state_dict anywhere.",
               "13 · When the model does not fit: ZeRO, FSDP2 and sharded checkpoints"),
    "DDP024": ("resume-where-file-exists", "every rank resumes only if {detail} exists where it runs, and one "
               "rank writes it: ranks on a node that does not see that file start over",
               "The snapshot is written by global rank 0 alone (on node 0), and every rank decides for itself "
               "whether to resume, from its own view of the filesystem. On a filesystem all nodes share, they "
               "agree and all is well, which is why this is advice. On node-local disks (or a relative path "
               "under a different working directory) only node 0's ranks find it: they resume at epoch E while "
               "the others start at epoch 0. The two groups then run different numbers of epochs, so the ranks "
               "that finish first leave the others waiting in a collective (a hang, or a timeout); a snapshot "
               "loaded after DDP wrapped the model also leaves the replicas with different weights, which DDP "
               "never re-syncs.",
               "Put the snapshot on a filesystem every node shares, and make the choice one choice: rank 0 "
               "checks, then broadcasts the answer (dist.broadcast_object_list([os.path.exists(path)], src=0)); "
               "or write a copy on each node (local rank 0 saves). Conservative: only a load under `if "
               "os.path.exists(path)` (or isfile, Path.exists) that no rank test guards, of a path that does "
               "not name the rank, in a script that tells the local rank from the global one and saves only on "
               "a global rank test (or save_on_master).",
               "08 · Fault tolerance; 10 · Multi-node, SLURM, and the security of the rendezvous"),
    "DDP025": ("resume-from-node-local-path", "every rank resumes only if {detail} exists where it runs, a path "
               "local to each node, and only global rank 0 writes it: the other nodes never find it",
               "The snapshot goes to a node's own storage (/tmp, /dev/shm, $TMPDIR, $SLURM_TMPDIR, "
               "tempfile.gettempdir()), written by global rank 0 alone, and every rank resumes only if its own node "
               "has the file. In a run on more than one node, which this script is written for (it handles nodes by "
               "name: nnodes, node_rank, NODE_RANK, SLURM_NODEID), the other nodes never have it: after a restart "
               "node 0's ranks resume at epoch E and the rest start at epoch 0, so they run different numbers of "
               "epochs and the first to finish leave the others waiting in a collective; a snapshot loaded after the"
               " DDP wrap also leaves the replicas with different weights.",
               "Save the snapshot to a filesystem every node shares, and decide on rank 0, then broadcast the answer"
               " (dist.broadcast_object_list). Same conservative shape as DDP024, with a path under a node's "
               "temporary storage, in a script that names nodes (without that, the same shape is DDP024's advice: on"
               " one machine every rank sees the same /tmp).",
               "08 · Fault tolerance; 10 · Multi-node, SLURM, and the security of the rendezvous"),
}


def rule_unguarded_save(m):
    """DDP005: torch.save on every rank of a DDP script.

    Warning: likely wrong: N processes writing one file can leave it mixed or cut short.
    """
    if not m.is_distributed:
        return
    for call in m.named_calls("save"):
        if dotted(call.func) == "torch.save" and not m.guarded(call) and not names_rank(m, call) and \
                not m.outside_group(call) and not unique_per_process(m, call) and not saves_to_memory(m, call) \
                and not unguarded_calls_skip(m, call):
            yield call, "DDP005", ""  # (a path that names the rank, or is new in each process: a file per rank;
            # before the group forms: one process; into an io.BytesIO: no file; a branch that only the
            # guarded calls of its function take)


def unguarded_calls_skip(m, call):
    """Whether a save in a function that some rank-unguarded path calls (m.unguarded_functions) is reached only
    from its guarded calls: every call of the function from module level or from another such function, outside
    a rank test, passes constants that make the save's branch false (`if p:`, its `elif` / `else`, `if not p:`,
    p a parameter given True, False or None by keyword, by position or by its default: sync.reached, as DDP011
    reads a helper's collectives). Not for a function mp.spawn starts, nor one a file of the folder imports
    (`from train import save_checkpoint`): calls the doctor cannot read."""
    fn = m.scope(call)
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    if not hasattr(m, "_unguarded_calls"):  # function -> one unguarded call per set of constants, read once
        m._unguarded_calls = {}
        m._unreadable_calls = {a.id for c in m.named_calls("spawn", "start_processes", "Process")  # mp.spawn(f)
                               for a in [*c.args, *(k.value for k in c.keywords)] if isinstance(a, ast.Name)}
        m._unreadable_calls |= set(getattr(m.folder_call_names, "imported", ()))
    if fn.name in m._unreadable_calls:
        return False
    if fn not in m._unguarded_calls:
        unguarded = {}  # calls that pass the same constants answer alike
        for site in m.named_calls(fn.name):
            scope = m.scope(site)
            caller = None if scope is None else getattr(scope, "name", "")
            if (caller is None or caller in m.unguarded_functions) and not m.locally_guarded(site):
                passed = [passed_constant(fn, site, p) for p in parameters(fn)]
                unguarded.setdefault(tuple(None if c is None else repr(c.value) for c in passed), site)
        m._unguarded_calls[fn] = list(unguarded.values())
    unguarded = m._unguarded_calls[fn]
    return bool(unguarded) and not any(reached(m, fn, site, call) for site in unguarded)


IN_MEMORY = {"BytesIO", "StringIO"}


def saves_to_memory(m, call):
    """Whether a save writes into an in-memory buffer, not a file: its target is io.BytesIO() / io.StringIO(),
    in the call or through a name that its function binds only from one (`buf = io.BytesIO()`, `with
    io.BytesIO() as f`), as a snapshot serialised to be broadcast is."""
    target = call.args[1] if len(call.args) > 1 else keyword(call, "f")
    if isinstance(target, ast.Call):
        return last_name(target) in IN_MEMORY
    if not isinstance(target, ast.Name):
        return False
    values = []
    for node in m.scope_nodes(m.scope(call)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == target.id for t in node.targets):
            values.append(node.value)
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name) and \
                node.optional_vars.id == target.id:
            values.append(node.context_expr)
    return bool(values) and all(isinstance(v, ast.Call) and last_name(v) in IN_MEMORY for v in values)


UNIQUE = {"uuid4", "uuid1", "getpid", "mkstemp", "NamedTemporaryFile", "mkdtemp", "TemporaryDirectory",
          "TemporaryFile", "SpooledTemporaryFile"}


def unique_per_process(m, call):
    """Whether a save's file is new in every process, so that each rank writes its own: the path (or the file
    object) comes from uuid.uuid4() / uuid1(), os.getpid(), tempfile.mkstemp / NamedTemporaryFile / mkdtemp, in
    the call or through a name its function binds from one (`name = f"batch-{uuid4()}.pt"`, `with
    NamedTemporaryFile() as f`, `fd, path = tempfile.mkstemp()`)."""
    target = [*call.args[1:], *(k.value for k in call.keywords if k.arg == "f")]
    if any(isinstance(n, ast.Call) and last_name(n) in UNIQUE for t in target for n in walk(t)):
        return True
    names = {n.id for t in target for n in walk(t) if isinstance(n, ast.Name)}
    if not names:
        return False
    for node in m.scope_nodes(m.scope(call)):
        if isinstance(node, ast.Assign):
            bound, value = {n.id for t in node.targets for n in walk(t) if isinstance(n, ast.Name)}, node.value
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            bound, value = {n.id for n in walk(node.optional_vars) if isinstance(n, ast.Name)}, node.context_expr
        else:
            continue
        if bound & names and any(isinstance(n, ast.Call) and last_name(n) in UNIQUE for n in walk(value)):
            return True
    return False


def names_rank(m, call):
    """Whether a save or load names the rank: in its arguments, or through a name that its function assigned
    from an expression with the rank in it (`path = f"queue{args.rank}.pth"`): a file per rank, on purpose,
    which each rank writes and reads back on its own device."""
    if m.mentions_rank(call):
        return True
    names = {a.id for a in [*call.args, *(k.value for k in call.keywords)] if isinstance(a, ast.Name)}
    return any(name in names and m.mentions_rank(value) for name, value in m.assignments(m.scope(call)))


CHECKPOINTISH = re.compile(r"state|checkpoint|ckpt|snapshot", re.I)


def rule_non_atomic_checkpoint(m):
    """DDP007: torch.save of a checkpoint in a function that renames nothing, in a DDP script.

    Advice: robustness: a checkpoint is lost only if the job dies during the write.
    """
    if not m.is_distributed:
        return
    renaming = {m.scope(n) for n in m.named_calls("replace", "rename")  # the scopes that rename a file
                if dotted(n.func).startswith("os.") or len(n.args) == 1}
    for call in m.named_calls("save"):
        if dotted(call.func) != "torch.save" or len(call.args) < 1:
            continue
        obj = call.args[0]
        looks = "state_dict" in {last_name(c) for c in calls_in(obj)} or text_mentions(obj, CHECKPOINTISH) or (
            len(call.args) > 1 and text_mentions(call.args[1], CHECKPOINTISH))
        if not looks:
            continue
        target = call.args[1] if len(call.args) > 1 else keyword(call, "f")
        if target is not None and re.search(r"BytesIO|tmp|temp|partial", unparse(target), re.I):
            continue  # a buffer, or a temporary file that some other line renames
        scope = m.scope(call)
        if target is not None and isinstance(target, ast.Name):
            buffers = m.bound_to(scope, lambda v: "BytesIO" in unparse(v))
            if target.id in buffers:
                continue
        if saves_to_memory(m, call):  # (`with io.BytesIO() as f`)
            continue
        if scope not in renaming:
            yield call, "DDP007", ""


def torch_loads(m):
    """torch.load calls whose keywords can be read (no **kwargs)."""
    return [call for call in m.named_calls("load") if dotted(call.func) == "torch.load" and
            not any(k.arg is None for k in call.keywords)]


def rule_load_without_map_location(m):
    """DDP008: torch.load() without map_location, in a DDP script.

    Warning: likely wrong: every rank's copy lands on the GPU it was saved from (GPU 0).
    """
    for call in torch_loads(m):
        if m.is_distributed and keyword(call, "map_location") is None and len(call.args) < 2 and \
                not m.locally_guarded(call) and not m.outside_group(call) and not other_branch_maps(m, call) and \
                not names_rank(m, call) and not m.behind_unset_flag(call) and not loads_cpu_files(m, call) and \
                loads_own_gpu_save(m, call) and not restores_scheduler_only(m, call):
            yield call, "DDP008", ""  # (a load that one rank does, or that runs before the group forms, is fine)


NOT_TENSORS = re.compile(r"sched|lr_|warmup", re.I)  # a scheduler's state: numbers, no tensors
EXTERNAL = re.compile(r"pretrain|pre_train|backbone|imagenet|embed|hub|url|download", re.I)
FILE_NAME = re.compile(r"([\w.{}%-]*\.(?:pth?|pt|ckpt|tar|bin|safetensors))\b")
PLACEHOLDER = re.compile(r"\{[^{}]*\}|%[-\d.]*[sdif]")


def same_file_name(a, b):
    """Whether two file names from path texts can name one file: equal, or one a pattern of the other with
    placeholders (`epoch_{}.pth`, `epoch_%d.pth`, f"epoch_{epoch}.pth") that has some text of its own."""
    if a == b:
        return True
    for pattern, name in ((a, b), (b, a)):
        if PLACEHOLDER.search(pattern) and not PLACEHOLDER.search(name):
            parts = PLACEHOLDER.split(pattern)
            if len("".join(parts).rpartition(".")[0]) >= 3 and \
                    re.fullmatch(r"[\w.-]+".join(map(re.escape, parts)), name):
                return True
    return False
PLAIN = {"self", "module", "model_to_save", "state_dict"}


def path_forms(m, scope, expr):
    """(whole, texts) of a path expression: whole, the texts of the whole path (its own text, or for a plain name
    the values its function assigns to it, or the path a `with open(p) as name:` around it opens): two paths with
    one such text in common are one file; texts, those and the values of every name inside it, where file names
    are read. The values of a name inside a longer path (`args` of `args.save`, `save_dir` of `join(save_dir,
    "rng.pt")`) are no text of the whole: two paths built from one `args` or one folder are not one file."""
    if expr is None:
        return [], []
    opened = opened_path(m, expr)
    if opened is not None:
        return path_forms(m, scope, opened)
    whole = [unparse(expr)]
    names = {n.id for n in walk(expr) if isinstance(n, ast.Name)}
    values = [(name, unparse(v)) for name, v in m.assignments(scope) if name in names]
    if isinstance(expr, ast.Name):
        whole += [text for name, text in values if name == expr.id]
    return whole, whole + [text for name, text in values if text not in whole]


def opened_path(m, expr):
    """The path that a `with open(p, ...) as name:` around a name opens (p), or None: the file a save or a load
    given the file object writes or reads."""
    if not isinstance(expr, ast.Name):
        return None
    for a in m.ancestors(expr):
        if isinstance(a, (ast.With, ast.AsyncWith)):
            for item in a.items:
                if isinstance(item.optional_vars, ast.Name) and item.optional_vars.id == expr.id:
                    value = item.context_expr
                    if isinstance(value, ast.Call) and last_name(value) == "open" and value.args:
                        return value.args[0]
                    return None
        elif isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return None
    return None


RNG_STATE = {"get_rng_state", "get_rng_state_all", "getstate", "get_state"}
RNG_MODULES = {"torch", "torch.random", "torch.cuda", "torch.cuda.random", "torch.mps", "torch.xpu", "random",
               "np.random", "numpy.random"}


def rng_state(expr):
    """Whether an expression holds random-number states only: calls of torch.get_rng_state(),
    torch.cuda.get_rng_state() / get_rng_state_all(), np.random.get_state(), random.getstate() (CPU tensors, arrays
    and tuples, wherever the generator runs), in tuples, lists and dicts with constant keys."""
    if isinstance(expr, ast.Call):
        name = dotted(expr.func)
        return name.rpartition(".")[2] in RNG_STATE and name.rpartition(".")[0] in RNG_MODULES
    if isinstance(expr, (ast.Tuple, ast.List)):
        return bool(expr.elts) and all(rng_state(e) for e in expr.elts)
    if isinstance(expr, ast.Dict):
        return bool(expr.values) and all(isinstance(k, ast.Constant) for k in expr.keys) and \
            all(rng_state(v) for v in expr.values)
    return False


def rng_saves(m):
    """The whole path texts of the file's torch.save calls that save random-number states only (rng_state: the
    saved expression, or the values its function assigns to the saved name): files with no GPU tensor in them."""
    if not hasattr(m, "_rng_saves"):
        found = []
        for save in m.named_calls("save"):
            if dotted(save.func) != "torch.save" or not save.args:
                continue
            saved, scope = save.args[0], m.scope(save)
            values = [saved] if not isinstance(saved, ast.Name) else \
                [v for name, v in m.assignments(scope) if name == saved.id]
            if values and all(rng_state(v) for v in values):
                found.append(path_forms(m, scope, save.args[1] if len(save.args) > 1 else keyword(save, "f")))
        m._rng_saves = found
    return m._rng_saves


def gpu_saves(m):
    """What the file's torch.save calls (and calls of save helpers given a dict) that write
    GPU tensors save: (whole path texts, path texts, owners, keys) for each save (path_forms)
    of a state_dict() (a model's, an optimizer's, a DDP wrapper's; not a scheduler's) not moved to the CPU.
    owners: the names around the objects whose state_dict() it saves; keys: the dict keys that hold one."""
    if hasattr(m, "_gpu_saves"):
        return m._gpu_saves
    found = []
    for save in m.named_calls(*[name for name in m.calls_named if "save" in name.lower()]):
        if not save.args or saves_cpu_tensors(m, save) or (
                dotted(save.func) != "torch.save" and not isinstance(save.args[0], (ast.Dict, ast.Name))):
            continue  # torch.save, or a save helper given a dict (save_checkpoint({...}, path))
        scope = m.scope(save)
        saved = [save.args[0]]
        if isinstance(save.args[0], ast.Name):
            saved += [v for name, v in m.assignments(scope) if name == save.args[0].id]
            saved += [node.value for node in m.statements(scope) if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Subscript) and dotted(t.value) == save.args[0].id for t in node.targets)]
        owners, keys = set(), set()
        for expr in saved:
            for c in calls_in(expr):
                if last_name(c) == "state_dict" and isinstance(c.func, ast.Attribute) and \
                        not text_mentions(c.func.value, NOT_TENSORS):
                    objects = [c.func.value] + [v for name, v in m.assignments(scope) if name == dotted(c.func.value)]
                    owners.update(n.id if isinstance(n, ast.Name) else n.attr for o in objects for n in walk(o)
                                  if isinstance(n, (ast.Name, ast.Attribute)))
            for d in walk(expr):
                if isinstance(d, ast.Dict):
                    keys.update(k.value for k, v in zip(d.keys, d.values) if isinstance(k, ast.Constant) and any(
                        last_name(c) == "state_dict" for c in calls_in(v)))
        if owners:
            target = save.args[1] if len(save.args) > 1 else keyword(save, "f")
            found.append((*path_forms(m, scope, target), owners - PLAIN, keys))
    m._gpu_saves = found
    return found


def loads_own_gpu_save(m, call):
    """Whether a load reads a file that the program itself writes with GPU tensors (DDP008 is reported only
    then): a save of a state_dict() not moved to the CPU, in this file or another file of the folder, to the
    same path expression or a path with the same file name (`checkpoint.pth`); or a load that feeds
    load_state_dict of an object whose state_dict the program saves (`model.load_state_dict(ckpt["net"])` after
    saving `{"net": model.state_dict()}`), unless its path names an outside file (pretrained, embedding).
    Files the program does not write (pretrained weights), files with no tensors (a scheduler's state, cached
    Python objects) are not its concern: their device is not visible in the code."""
    saves = gpu_saves(m)
    folder = getattr(m.folder_call_names, "gpu_saves", ())  # (file names, owners) from the folder's files
    if not saves and not folder:
        return False
    scope = m.scope(call)
    path = call.args[0] if call.args else keyword(call, "f")
    whole, texts = path_forms(m, scope, path)
    names = {n for t in texts for n in FILE_NAME.findall(t)}
    saved_names = {n for _, save_texts, _, _ in saves for t in save_texts for n in FILE_NAME.findall(t)}
    saved_names |= {n for files, _ in folder for n in files}
    if any(set(whole) & set(save_whole) for save_whole, _, _, _ in saves) or \
            any(same_file_name(a, b) for a in names for b in saved_names):
        return True
    rng = rng_saves(m)  # a file that holds random-number states only (`rng.pt`): no GPU tensor in it
    if any(set(whole) & set(save_whole) for save_whole, _ in rng) or any(
            same_file_name(a, n) for a in names for _, save_texts in rng for t in save_texts
            for n in FILE_NAME.findall(t)):
        return False
    if any(text_mentions(e, EXTERNAL) for e in ([path] if path is not None else [])) or \
            any(EXTERNAL.search(t) for t in texts):
        return False
    owners = {o for _, _, os_, _ in saves for o in os_} | {o for _, os_ in folder for o in os_}
    keys = {k for _, _, _, ks in saves for k in ks}
    feeds = m.parent.get(call)
    key = None
    if isinstance(feeds, ast.Subscript):  # torch.load(p)["model"]
        key, feeds = feeds.slice, m.parent.get(feeds)
    target = None
    if isinstance(feeds, ast.Call) and last_name(feeds) == "load_state_dict" and isinstance(feeds.func, ast.Attribute):
        target = feeds.func.value
    elif isinstance(feeds, ast.Assign) and len(feeds.targets) == 1 and isinstance(feeds.targets[0], ast.Name):
        loaded = feeds.targets[0].id  # ckpt = torch.load(p); model.load_state_dict(ckpt["net"])
        for c in m.named_calls("load_state_dict"):
            if m.scope(c) is scope and c.args and isinstance(c.func, ast.Attribute):
                arg = c.args[0]
                if isinstance(arg, ast.Subscript) and dotted(arg.value) == loaded and \
                        isinstance(arg.slice, ast.Constant) and arg.slice.value in keys:
                    return True
                if dotted(arg) == loaded and _owned(c.func.value, owners):
                    return True
        return False
    if target is None:
        return False
    if key is not None and isinstance(key, ast.Constant) and key.value in keys:
        return True
    return _owned(target, owners)


SCHEDULER_BUILDER = re.compile(r"lr_scheduler\.\w+|\w*(?:LR|Scheduler|_schedule\w*|_scheduler)", re.I)


def is_scheduler(m, obj):
    """Whether an object is an LR scheduler: named *sched*, or bound (`x = ...`, `self.x = ...`) in the file to a
    call of torch.optim.lr_scheduler.* or of a scheduler factory (ExponentialLR, get_cosine_schedule_with_warmup,
    create_scheduler)."""
    name = dotted(obj)
    if not name:
        return False
    if re.search("sched", name.split(".")[-1], re.I):
        return True
    for scope in [None, *m.functions_flat()]:
        for target, value in m.assignments(scope):
            if target == name and isinstance(value, ast.Call) and SCHEDULER_BUILDER.fullmatch(dotted(value.func)
                                                                                             .split("torch.optim.")[-1]):
                return True
    return False


COUNTER = re.compile(r"epoch|step|iter|itr|count|idx|index|num", re.I)


def plain_number(expr):
    """A value that holds no tensor: a constant, a counter's name or attribute (epoch, self.global_step), or
    arithmetic of them."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, (ast.Name, ast.Attribute)):
        return bool(COUNTER.search(dotted(expr).split(".")[-1]))
    if isinstance(expr, ast.BinOp):
        return plain_number(expr.left) and plain_number(expr.right)
    if isinstance(expr, ast.UnaryOp):
        return plain_number(expr.operand)
    return False


def restores_scheduler_only(m, call):
    """Whether a load's value is used only to restore LR schedulers (`sched.load_state_dict(torch.load(p))`, or `d =
    torch.load(p)` then only `sched.load_state_dict(d["key"])` until d is bound again), and the file holds no
    tensor as far as the program writes it: every saved dict that stores one of the keys read holds only
    scheduler state_dicts and plain numbers (`{"epoch": epoch, "scheduler_state_dict": sched.state_dict()}`), and
    there is at least one such dict in this file. A scheduler's state_dict holds numbers: map_location has nothing
    to map. A load that also restores an optimizer or a model, or reads any other way, is not this."""
    feeds = m.parent.get(call)
    uses = []  # (key or None, the load_state_dict call)
    if isinstance(feeds, ast.Subscript) and isinstance(feeds.slice, ast.Constant):
        uses.append((feeds.slice.value, m.parent.get(feeds), feeds))
    elif isinstance(feeds, ast.Call) and call in feeds.args:
        uses.append((None, feeds, call))
    elif isinstance(feeds, ast.Assign) and len(feeds.targets) == 1 and isinstance(feeds.targets[0], ast.Name):
        name, scope = feeds.targets[0].id, m.scope(call)
        later = [a for a in m.statements(scope) if isinstance(a, ast.Assign) and a.lineno > feeds.lineno and any(
            isinstance(n, ast.Name) and n.id == name for t in a.targets for n in walk(t))]
        end = min([a.lineno for a in later], default=float("inf"))
        for stmt in m.statements(scope):
            if not feeds.end_lineno < stmt.lineno <= end or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in walk(stmt):
                if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
                    up = m.parent.get(n)
                    if isinstance(up, ast.Subscript) and up.value is n and isinstance(up.slice, ast.Constant):
                        uses.append((up.slice.value, m.parent.get(up), up))
                    else:
                        uses.append((None, up, n))
    if not uses:
        return False
    for _key, user, arg in uses:
        if not (isinstance(user, ast.Call) and last_name(user) == "load_state_dict" and
                isinstance(user.func, ast.Attribute) and user.args and user.args[0] is arg and
                is_scheduler(m, user.func.value)):
            return False
    keys = {key for key, _, _ in uses}
    if None in keys:  # the whole file is a state_dict: each save to the same path saves a scheduler's state_dict
        path = call.args[0] if call.args else keyword(call, "f")
        whole, texts = path_forms(m, m.scope(call), path)
        names = {n for t in texts for n in FILE_NAME.findall(t)}

        def same_file(save):
            written_whole, written = path_forms(m, m.scope(save), save.args[1])
            return bool(set(whole) & set(written_whole)) or any(same_file_name(a, n) for a in names
                                                                for t in written for n in FILE_NAME.findall(t))
        same = [c for c in m.named_calls("save") if dotted(c.func) == "torch.save" and len(c.args) > 1 and
                same_file(c)]
        return bool(same) and all(isinstance(c.args[0], ast.Call) and last_name(c.args[0]) == "state_dict" and
                                  isinstance(c.args[0].func, ast.Attribute) and
                                  is_scheduler(m, c.args[0].func.value) for c in same)
    holders = [d for d in saved_values(m) if isinstance(d, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value in keys for k in d.keys)]
    if not holders:
        return False
    for d in holders:
        for k, v in zip(d.keys, d.values):
            if k is None:
                return False  # {**other}
            if isinstance(v, ast.Call) and last_name(v) == "state_dict" and isinstance(v.func, ast.Attribute) and \
                    is_scheduler(m, v.func.value):
                continue
            if not plain_number(v):
                return False
    return True


def _owned(target, owners):
    parts = {n.id if isinstance(n, ast.Name) else n.attr for n in walk(target)
             if isinstance(n, (ast.Name, ast.Attribute))}
    return bool((parts - PLAIN) & owners)


OPTIMIZER = re.compile(r"optim|scheduler", re.I)


def loads_cpu_files(m, call):
    """Whether every file this load may read holds CPU tensors: each torch.save in sight (the file, and no
    other torch.save in its folder) saves tensors moved to the CPU first (`param.cpu()`, `.to("cpu")`, `{k:
    v.cpu() ...}` on what it saves), or an optimizer's state that the script loads with map_location
    elsewhere, and this load does not feed an optimizer. A CPU tensor loads onto the CPU: nothing lands on GPU 0."""
    saves = [c for c in m.named_calls("save") if dotted(c.func) == "torch.save"]
    folder_saves = getattr(m.folder_call_names, "torch_saves", None)
    if not saves or (folder_saves is not None and folder_saves > len(saves)):
        return False  # no save in sight, or saves in other files of the folder the doctor does not read here
    feeds = m.parent.get(call)
    if isinstance(feeds, ast.Call) and last_name(feeds) == "load_state_dict" and \
            text_mentions(feeds.func, OPTIMIZER):
        return False
    cpu = 0
    for save in saves:
        if saves_cpu_tensors(m, save) or (save.args and rng_state(save.args[0])):
            cpu += 1  # (random-number states are CPU tensors)
        elif not (save.args and isinstance(save.args[0], ast.Call) and last_name(save.args[0]) == "state_dict" and
                  text_mentions(save.args[0].func, OPTIMIZER)):
            return False
    return cpu > 0


def moves_to_cpu(node):
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (
        (n.func.attr == "cpu" and not n.args) or (n.func.attr == "to" and n.args and (
            is_const(n.args[0], "cpu") or (isinstance(n.args[0], ast.Call) and dotted(n.args[0].func) in (
                "torch.device", "device") and n.args[0].args and is_const(n.args[0].args[0], "cpu")))))
        for n in walk(node))


def saves_cpu_tensors(m, save):
    """Whether a torch.save saves tensors moved to the CPU: the saved expression moves them itself, or its name
    is assigned (or its items set) from values moved to the CPU in the same function."""
    if not save.args:
        return False
    saved = save.args[0]
    if moves_to_cpu(saved):
        return True
    if not isinstance(saved, ast.Name):
        return False
    for node in m.scope_nodes(m.scope(save)):
        if isinstance(node, ast.Assign) and moves_to_cpu(node.value) and any(
                dotted(t) == saved.id or (isinstance(t, ast.Subscript) and dotted(t.value) == saved.id)
                for t in node.targets):
            return True
    return False


def other_branch_maps(m, call):
    """Whether the `if` around this load passes map_location to a torch.load in its other branch: the script
    chooses per branch (`if args.gpu is None: torch.load(p)` / `else: torch.load(p, map_location=loc)`)."""
    for branch, in_body in m.enclosing_ifs(call):
        other = branch.orelse if in_body else branch.body
        for stmt in other if isinstance(other, list) else [other]:
            if any(dotted(c.func) == "torch.load" and (keyword(c, "map_location") is not None or len(c.args) > 1)
                   for c in calls_in(stmt)):
                return True
    return False


def rule_load_weights_only_false(m):
    """DDP009: torch.load(..., weights_only=False).

    Advice: security: unpickling can run code from the file; a choice for one's own checkpoints, not a DDP fault.
    """
    for call in torch_loads(m):
        if is_const(keyword(call, "weights_only"), False):
            yield keyword(call, "weights_only"), "DDP009", ""


def rule_saved_module_prefix(m):
    """DDP010: torch.save of ddp_model.state_dict().

    Advice: a risk: wrong only for a reader that loads the file into a plain model without renaming its keys.
    """
    restored = any(isinstance(c.func, ast.Attribute) and dotted(c.func.value) in m.ddp_names(m.scope(c))
                   for c in m.named_calls("load_state_dict"))
    exported = any(any(last_name(s) == "state_dict" and ".module" in "." + dotted(s.func) for s in calls_in(c))
                   for c in m.named_calls(*[name for name in m.calls_named if "save" in name.lower()]))
    if restored and exported:
        return  # resume checkpoints go back into the DDP model, and the weights for use without DDP are saved
        # unwrapped (model.module....state_dict()): the 'module.' keys never leave the script
    for save in m.named_calls("save"):
        if dotted(save.func) != "torch.save" or not save.args:
            continue
        scope = m.scope(save)
        ddp = m.ddp_names(scope, before=save)
        saved = [save.args[0]]
        if isinstance(save.args[0], ast.Name):  # state = {...}; torch.save(state, path)
            values = m.bound_to(scope, lambda v: True)
            saved += [values[save.args[0].id]] if save.args[0].id in values else []
        for expr in saved:
            for c in calls_in(expr):
                if last_name(c) == "state_dict" and isinstance(c.func, ast.Attribute) and \
                        dotted(c.func.value) in ddp:
                    yield c, "DDP010", dotted(c.func.value)


def saved_values(m):
    """The dicts a file saves, and the `name[key] = ...` lines that fill them: a dict (or dict(...)) inside the
    arguments of a call named like a save (torch.save, save_on_master, save_checkpoint), or bound to a name
    that such a call receives in the same function. Computed once per file."""
    if hasattr(m, "_saved_values"):
        return m._saved_values
    found, passed = set(), {}  # passed: scope -> names given to a save call there
    for call in m.named_calls(*[name for name in m.calls_named if "save" in name.lower()]):
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if isinstance(arg, ast.Name):
                passed.setdefault(m.scope(call), set()).add(arg.id)
            found.update(n for n in walk(arg) if isinstance(n, (ast.Dict, ast.Call)))
    for scope, names in passed.items():
        for node in m.statements(scope):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in names:
                        found.update(n for n in walk(node.value) if isinstance(n, (ast.Dict, ast.Call)))
                    elif isinstance(target, ast.Subscript) and dotted(target.value) in names:
                        found.add(node)
    m._saved_values = found
    return found


def rule_resume_repeats_epoch(m):
    """DDP020: the file stores the epoch loop's variable as it is (the finished epoch), and starts a
    range() at a value read from a checkpoint's epoch entry as it is (no + 1).

    Error: a wrong result: an epoch is trained twice after every resume.
    """
    epochish = re.compile("epoch", re.I)
    loop_vars = {dotted(loop.target) for loop in m.epoch_loops()} - {""}

    def epoch_key(key):
        return isinstance(key, ast.Constant) and isinstance(key.value, str) and epochish.search(key.value)

    def finished_epoch(value):  # the loop variable itself (or a parameter of the same name), not epoch + 1
        return isinstance(value, ast.Name) and value.id in loop_vars

    saved = saved_values(m)
    epoch_loops = set(m.epoch_loops())
    stored = set()  # the keys under which a saved dict stores the finished epoch
    for node in m.of_type(ast.Dict, ast.Call, ast.Assign):
        if node not in saved:
            continue  # a log line's dict(epoch=epoch, ...) is not the checkpoint
        if isinstance(node, ast.Dict):
            keys = {k.value for k, v in zip(node.keys, node.values) if epoch_key(k) and finished_epoch(v)}
        elif isinstance(node, ast.Call) and dotted(node.func) == "dict":
            keys = {k.arg for k in node.keywords if k.arg and epochish.search(k.arg) and finished_epoch(k.value)}
        elif isinstance(node, ast.Assign) and finished_epoch(node.value):
            keys = {t.slice.value for t in node.targets if isinstance(t, ast.Subscript) and epoch_key(t.slice)}
        else:
            continue
        if keys and isinstance(node, (ast.Dict, ast.Call)) and (
                mid_epoch_position(m, node, epoch_loops) or saved_before_training(m, node, epoch_loops)):
            continue  # saved inside the epoch, with where in it to restart (the epoch in progress), or at the top of
            # the epoch, before it trains (the epoch that has not run yet): not a finished epoch
        stored |= keys
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


POSITION = re.compile(r"start|resume|step|batch|iter|idx|index|offset|position|group|shard|chunk", re.I)


def mid_epoch_position(m, node, epoch_loops):
    """Whether a saved dict is built inside a loop nested in the epoch loop (mid-epoch; or in a loop of a
    function that only the epoch loop calls, train_one_epoch) and stores, beside the
    epoch, where in the epoch to restart: that inner loop's variable (`"start_group": group_idx`), or a value
    under a key that names a position (`"batch_idx": ...`, `"resume_step": ...`). Such a checkpoint stores the
    epoch in progress on purpose: resuming at it, from that position, repeats nothing."""
    inner, child, parent = set(), node, m.parent.get(node)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        if parent in epoch_loops:
            break
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.While)) and child is not getattr(parent, "iter", None):
            inner.add(parent)
        child, parent = parent, m.parent.get(parent)
    else:
        if not (isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and called_in_epoch_loop(m, parent)):
            return False  # (a function the epoch loop calls, train_one_epoch(...): its loops run inside the epoch)
    if not inner:
        return False
    names = {n.id for loop in inner if isinstance(loop, (ast.For, ast.AsyncFor))
             for n in walk(loop.target) if isinstance(n, ast.Name)}
    if isinstance(node, ast.Dict):
        items = [(k.value if isinstance(k, ast.Constant) else "", v) for k, v in zip(node.keys, node.values)]
    else:
        items = [(k.arg or "", k.value) for k in node.keywords]
    return any(isinstance(v, ast.Name) and v.id in names or (
        isinstance(key, str) and POSITION.search(key) and not re.search("epoch", key, re.I)) for key, v in items)


TRAINS = re.compile(r"backward|step|train\w*|fit|\w*_epoch|epoch_\w*", re.I)


def trains(stmts):
    """Whether these statements train: a loop (a batch loop), or a call of backward, step, train..., fit or
    ..._epoch (not set_epoch, and not a bare `model.train()`, which only sets a mode)."""
    for stmt in stmts:
        for n in walk(stmt):
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
                return True
            if isinstance(n, ast.Call):
                name = last_name(n)
                if name == "set_epoch" or name == "train" and not n.args and not n.keywords:
                    continue
                if name and TRAINS.fullmatch(name):
                    return True
    return False


def saved_before_training(m, node, epoch_loops):
    """Whether a saved dict is written at the top of the epoch loop, before the epoch trains: the dict is in a
    statement of the loop's body (or in a function, outside any loop of it, that the epoch loop calls there, and
    elsewhere only once training is over, after an epoch loop: the final save), no statement ahead of it in the
    loop's body trains (no loop, no backward/step/train call), and one after it does. Such a checkpoint holds the
    previous epoch's finished state under the number of the epoch that has not run yet: restarting at that number
    repeats nothing."""
    child, parent = node, m.parent.get(node)
    while parent is not None and parent not in epoch_loops:
        if isinstance(parent, (ast.For, ast.AsyncFor, ast.While)) and child is not getattr(parent, "iter", None):
            return False  # in an inner loop: mid-epoch, judged by mid_epoch_position
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)):
            break
        child, parent = parent, m.parent.get(parent)
    if parent in epoch_loops:
        sites = [child]
    elif isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
        sites = [c for c in m.calls_named.get(parent.name, []) if isinstance(c.func, ast.Name) or (
            isinstance(c.func, ast.Attribute) and dotted(c.func.value) == "self")]
    else:
        return False
    in_loop = False
    for site in sites:
        stmt, loop = site, m.parent.get(site)
        while loop is not None and loop not in epoch_loops:
            stmt, loop = loop, m.parent.get(loop)
        if loop is None:  # outside every epoch loop: only the final save, after an epoch loop of its function
            scope = m.scope(site)
            if not any(m.scope(e) is scope and e.end_lineno < site.lineno for e in epoch_loops):
                return False
            continue
        if stmt not in loop.body:
            return False
        in_loop = True
        at = loop.body.index(stmt)
        if trains(loop.body[:at]) or not trains(loop.body[at + 1:]):
            return False
    return in_loop


def called_in_epoch_loop(m, fn):
    """Whether the file calls this function (`train(...)`, `self.train(...)`) inside an epoch loop, and only there
    (not counting `model.train()`, a method of another object)."""
    calls = [c for c in m.calls_named.get(fn.name, []) if isinstance(c.func, ast.Name) or (
        isinstance(c.func, ast.Attribute) and dotted(c.func.value) == "self")]
    loops = set(m.epoch_loops())
    return bool(calls) and all(any(a in loops for a in m.ancestors(c)) for c in calls)


def rule_zero_state_not_consolidated(m):
    """DDP021: zero_optimizer.state_dict() with no consolidate_state_dict in the file or its folder.

    Error: a crash: the state of a sharded optimizer is not on the calling rank.
    """
    if "consolidate_state_dict" in m.call_names | m.folder_call_names:
        return
    for call in m.named_calls("state_dict"):
        if isinstance(call.func, ast.Attribute):
            name = dotted(call.func.value)
            zero = m.bound_to(m.scope(call), lambda v: isinstance(v, ast.Call) and
                              last_name(v) == "ZeroRedundancyOptimizer")
            if name and (name in zero or name in m.bound_to(None, lambda v: isinstance(v, ast.Call) and
                                                                last_name(v) == "ZeroRedundancyOptimizer")):
                yield call, "DDP021", name


LOADISH = re.compile(r"^_?(load|restore|resume)\w*(snapshot|checkpoint|ckpt|state|model|weights)|^_?resume", re.I)
SAVEISH = re.compile(r"^_?save\w*(snapshot|checkpoint|ckpt|state|model|weights|master|main)", re.I)
NODE_LOCAL = re.compile(r"^/tmp\b|^/dev/shm\b|^/var/tmp\b|TMPDIR|gettempdir|LOCAL_?SCRATCH|TMP$|TEMP$")
LOCAL_RANK = re.compile(r"local_?rank|gpu_id|local_process", re.I)
NODES = re.compile(r"nnodes|num_nodes|node_rank|NODE_RANK|SLURM_NODEID|GROUP_RANK", re.I)
GLOBAL_RANK = re.compile(r"global_?rank", re.I)


def tells_nodes(m):
    """Whether the file tells the local rank from the global one (it is written for more than one node): it
    reads LOCAL_RANK (or a local rank by name, get_node_local_rank) and a global rank (get_rank, RANK), or it
    names nodes (nnodes, NODE_RANK)."""
    if not hasattr(m, "_tells_nodes"):
        words = set(m.strings())
        source = getattr(m, "source", None)  # the text the tree was read from (the driver gives it)
        lowered = source.lower() if source is not None and source.isascii() else None
        used = None

        def names_match(pattern, pieces):
            """Whether a name or attribute of the file matches pattern (re.I; pieces: what it finds, lowercase).
            In an ASCII file every name is a piece of the text: where the lowered text holds no piece, no name
            does, and the set of names (a million nodes in a long file) need not be built."""
            nonlocal used
            if lowered is not None and not any(piece in lowered for piece in pieces):
                return False
            if used is None:
                used = set(map(attrgetter("id"), m.of_type(ast.Name))) | set(
                    map(attrgetter("attr"), m.of_type(ast.Attribute)))
            return any(pattern.search(w) for w in used)

        local = words & {"LOCAL_RANK", "SLURM_LOCALID"} or "get_node_local_rank" in m.call_names or names_match(
            LOCAL_RANK, ("local_rank", "localrank", "gpu_id", "local_process"))
        global_ = words & {"RANK", "SLURM_PROCID"} or "get_rank" in m.call_names or names_match(
            GLOBAL_RANK, ("global_rank", "globalrank"))
        m._names_nodes = any(NODES.search(w) for w in words) or names_match(
            NODES, ("nnodes", "num_nodes", "node_rank", "slurm_nodeid", "group_rank"))
        m._tells_nodes = bool(local and global_) or m._names_nodes
    return m._tells_nodes


def names_nodes(m):
    """Whether the file handles nodes by name (nnodes, node_rank, NODE_RANK, SLURM_NODEID, GROUP_RANK): it is
    meant to run on several machines, not merely able to."""
    tells_nodes(m)
    return m._names_nodes


def exists_test(test):
    """The os.path.exists(p) / os.path.isfile(p) / Path(p).exists() call an `if` test is, or one of the parts
    of its `and`; None for anything else (`not exists(...)`, a flag)."""
    for part in test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]:
        if isinstance(part, ast.Call) and last_name(part) in ("exists", "isfile", "is_file"):
            if dotted(part.func).endswith(("path.exists", "path.isfile")) and part.args:
                return part
            if isinstance(part.func, ast.Attribute) and not part.args and not dotted(part.func).startswith("os."):
                return part
    return None


def checked_path(call):
    if call.args:
        return call.args[0]
    value = call.func.value  # Path(p).exists(): p
    return value.args[0] if isinstance(value, ast.Call) and last_name(value) == "Path" and value.args else value


def per_rank_path(m, path):
    """Whether a path names the rank, as it is or through what the file assigns to it (any function)."""
    if m.mentions_rank(path):
        return True
    return any(m.mentions_rank(v) for v in values_assigned(m).get(dotted(path), ()))


def values_assigned(m):
    """name or attribute chain (dotted) -> the values the file assigns to it, in any function (read once)."""
    if not hasattr(m, "_values_assigned"):
        m._values_assigned = {}
        for n in m.of_type(ast.Assign):
            for t in n.targets:
                if dotted(t):
                    m._values_assigned.setdefault(dotted(t), []).append(n.value)
    return m._values_assigned


def global_writer(m):
    """Whether the file's checkpoints are written by one rank of the whole job: every save (torch.save, or a
    save_checkpoint-like call) sits under a rank test, one of them at least on the global rank (not
    `local_rank == 0`, not `rank % gpus_per_node == 0`, which write a copy per node), or it calls
    save_on_master / save_on_main."""
    saves = [c for c in m.named_calls("save") if dotted(c.func) == "torch.save"] + m.named_calls(
        *[name for name in m.calls_named if SAVEISH.search(name)])  # (by name: the answer takes no order)
    if not saves:
        return False
    single = False
    for save in saves:
        if re.search(r"on_(master|main)", last_name(save)):
            single = True
            continue
        tests = [i.test for i, _ in m.enclosing_ifs(save)]
        scope = m.scope(save)
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):  # the guard may be at the callers
            tests += [i.test for c in m.named_calls(scope.name) for i, _ in m.enclosing_ifs(c)]
        guards = [t for t in tests if m.mentions_rank(t)]
        if not guards:
            return False  # some save runs on every rank: each node may well have its own copy
        if any(per_node_test(t) for t in guards):
            return False
        single = True
    return single


def per_node_test(test):
    """`local_rank == 0`, `args.rank % ngpus_per_node == 0`, `gpu == 0`: a test that one rank per node passes."""
    return text_mentions(test, re.compile(r"local|gpu|node", re.I)) or any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and text_mentions(n.left, re.compile("rank", re.I))
        for n in walk(test))


def resumes_where_file_exists(m):
    """(the exists call, the path it checks, whether the path is node-local) for each resume that every rank
    decides from its own filesystem, in a multi-node script whose snapshot one global rank writes."""
    if not m.is_distributed or not tells_nodes(m) or not global_writer(m):
        return
    for branch in m.of_type(ast.If):
        call = exists_test(branch.test)
        if call is None or m.mentions_rank(branch.test) or m.locally_guarded(branch):
            continue
        loads = [c for stmt in branch.body for c in calls_in(stmt)
                 if dotted(c.func) == "torch.load" or LOADISH.search(last_name(c))]
        path = checked_path(call)
        if not loads or per_rank_path(m, path):
            continue
        yield call, unparse(path), node_local(m, path)


def node_local(m, path, depth=0):
    """Whether a path lies under a node's own temporary storage: /tmp, /dev/shm, $TMPDIR, tempfile's folders."""
    if text_mentions(path, NODE_LOCAL):
        return True
    if depth < 3 and isinstance(path, (ast.Name, ast.Attribute)):
        name = dotted(path)
        if any(node_local(m, value, depth + 1) for value in values_assigned(m).get(name, ())):
            return True
        option = "--" + name.rpartition(".")[2]  # args.snapshot: parser.add_argument("--snapshot", default=...)
        return any(c.args and isinstance(c.args[0], ast.Constant) and str(c.args[0].value).replace("-", "_") ==
                   option.replace("-", "_") and keyword(c, "default") is not None and
                   text_mentions(keyword(c, "default"), NODE_LOCAL) for c in m.named_calls("add_argument"))
    if depth < 3:
        return any(node_local(m, n, depth + 1) for n in walk(path) if n is not path and
                   isinstance(n, (ast.Name, ast.Attribute)))
    return False


def rule_resume_where_file_exists(m):
    """DDP024: `if os.path.exists(path): load` on every rank, of a snapshot that global rank 0 alone writes, in a
    script written for several nodes.

    Advice: a risk: wrong only where the nodes do not share the filesystem that holds the path.
    """
    for call, path, local in resumes_where_file_exists(m):
        if not (local and names_nodes(m)):
            yield call, "DDP024", path


def rule_resume_from_node_local_path(m):
    """DDP025: as DDP024, with the snapshot under a node's own storage (/tmp, /dev/shm, $TMPDIR, tempfile), in a
    script that handles nodes by name (nnodes, node_rank, NODE_RANK, SLURM_NODEID): meant for several machines.

    Warning: likely wrong: on more than one node, the nodes other than node 0 never find the snapshot.
    """
    for call, path, local in resumes_where_file_exists(m):
        if local and names_nodes(m):
            yield call, "DDP025", path
