"""How the processes start: the device a rank uses, the backend, the launcher's variables.

Each rule_* function takes a program.Module and yields (node, code, detail); RULES holds its codes:
code -> (name, message, why, fix, lesson)."""

import ast
import re

from ..program import (
    dotted,
    is_const,
    is_global_rank_expr,
    keyword,
    last_name,
    text_mentions,
    unparse,
)

RULES = {
    "DDP001": ("global-rank-as-device", "{detail} is the global rank (get_rank() / RANK), used as a device index: "
               "wrong on a second node; use LOCAL_RANK",
               "get_rank() and RANK number the processes of the whole job. On one machine they equal the local "
               "rank, and the script runs; on a second machine they go on from where the first machine stopped "
               "(8, 9, ...), so cuda:RANK names a GPU that does not exist ('invalid device ordinal'). This program "
               "shows no launch across nodes (it reads no node rank and no number of nodes), so the mistake waits "
               "for a launch the code does not show: advice. The same use in a program that reads a node's rank "
               "or the number of nodes is DDP026, an error.",
               "local_rank = int(os.environ['LOCAL_RANK']); torch.cuda.set_device(local_rank). Conservative: "
               "only a name assigned from get_rank() / RANK in the same function, by the assignment that reaches "
               "the use (not the other branches of an if/elif chain that set it from a local rank), or the "
               "call itself, used "
               "directly as a device index (set_device, torch.accelerator.set_device_index(i), "
               "torch.device('cuda', i), f'cuda:{i}', .cuda(i), "
               "device_ids=[i], .to(i)). Silent in a program that is single-node by construction: it sets "
               "MASTER_ADDR (or a tcp:// init_method) to localhost / 127.0.0.1 itself and starts its processes "
               "with mp.spawn, so every process runs on this machine and the global rank is the local rank; or it "
               "joins its group as its local rank (init_process_group(..., rank=local_rank), read from LOCAL_RANK, "
               "or the launcher's --local_rank option: rank=args.local_rank), which two nodes could not do.",
               "02 · Processes, ranks and world size; 04 · From single device to DDP"),
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
               "Choose GPUs outside the script: CUDA_VISIBLE_DEVICES=0,2 torchrun --nproc_per_node=2 train.py. "
               "Advice: it goes wrong only on a launch the code does not show (a scheduler that gave the job other "
               "GPUs, a list that disagrees with --nproc_per_node, CUDA started before the line). "
               "Whatever the value's source (a string, an option such as --gpu_id with a GPU list as its default), "
               "the line overrides what the launcher or the scheduler chose, and an option's default puts every "
               "run that does not override it on those GPUs. "
               "Conservative: only a GPU list written in the script (a string, or an argparse default); silent "
               "for \"-1\" (a CPU run), a value computed from the rank (an MPI or SLURM task's own GPU) or one "
               "the doctor cannot read (a function's parameter, a configuration file's entry), and for a "
               "command-line option that the script sets before it starts its workers itself (mp.spawn): the "
               "person running it chose the GPUs.",
               "04 · From single device to DDP"),
    "DDP014": ("legacy-local-rank-argument", "{detail} as an argparse option: the legacy launcher's way",
               "torch.distributed.launch passed --local_rank (since torch 2.0 --local-rank) on the command "
               "line; torchrun passes nothing and sets LOCAL_RANK. Under torchrun the option keeps its "
               "default (every process on GPU 0); under launch one spelling is 'unrecognized arguments'.",
               "local_rank = int(os.environ['LOCAL_RANK']). Silent when the option's default reads LOCAL_RANK "
               "(the compatible form lesson 04 shows).",
               "04 · From single device to DDP"),
    "DDP026": ("global-rank-as-device-multi-node", "{detail} is the global rank (get_rank() / RANK), used as a "
               "device index in a program that runs on several nodes: use LOCAL_RANK",
               "get_rank() and RANK number the processes of the whole job: on the second node they go on from "
               "where the first stopped (8, 9, ...), so cuda:RANK names a GPU that does not exist ('invalid device "
               "ordinal'), or two processes share one GPU. This program shows that it runs on several nodes: it "
               "reads a node's rank or the number of nodes, so every launch it is written for crashes on every "
               "node after the first.",
               "local_rank = int(os.environ['LOCAL_RANK']) (or global rank % GPUs per node); "
               "torch.cuda.set_device(local_rank). The same conservative shape as DDP001, with the same silences "
               "(single-node by construction), in a program that shows several nodes: the file (or a file of its "
               "folder) reads NODE_RANK, GROUP_RANK, SLURM_NODEID, SLURM_NNODES or SLURM_JOB_NUM_NODES from the "
               "environment (os.environ[...], .get, getenv), or has an option, parameter, attribute or variable "
               "named like nnodes, num_nodes, n_nodes, node_rank, node_id, machine_rank or num_machines (or the "
               "option --nodes, -nr / --nr, args.nodes, args.nr of the pytorch DDP tutorial). Without such a "
               "fact the same use is DDP001's advice.",
               "02 · Processes, ranks and world size; 10 · Multi-node, SLURM, and the security of the rendezvous"),
}


def is_global_rank(m, node, global_ranks):
    """The global rank itself: the call that reads it, or a name bound to it in this scope by an assignment that
    reaches node (`local_rank = dist.get_rank()` in one branch of an if/elif chain does not reach the uses in
    the branches that set `local_rank = hvd.local_rank()` or `int(os.environ["LOCAL_RANK"])`)."""
    if is_global_rank_expr(node):
        return True
    if not (isinstance(node, ast.Name) and node.id in global_ranks):
        return False
    reaching = m.reaching_values(node.id, node)
    return reaching is None or any(is_global_rank_expr(v) for v in reaching)


DEVICE_CALLS = {"set_device", "set_device_index", "device", "cuda", "to"}  # the last names device_indices reads


def device_indices(call):
    """The arguments of a call that name a device index: set_device(i), set_device_index(i),
    torch.device("cuda", i), .cuda(i),
    .to(i), device_ids=[i]."""
    found = []
    if last_name(call) in DEVICE_CALLS:  # (the dotted name is read only for these)
        name = dotted(call.func)
        if name.endswith(("cuda.set_device", "accelerator.set_device_index", "xpu.set_device")) and call.args:
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


def global_rank_devices(m):
    """[(node, detail)] for each global rank used directly as a device index, read once for DDP001 and DDP026;
    nothing in a program that is single-node by construction."""
    if not hasattr(m, "_global_rank_devices"):
        m._global_rank_devices = list(_global_rank_devices(m))
    return m._global_rank_devices


def _global_rank_devices(m):
    if m.single_node():
        return  # every process on this machine: the global rank is the local rank
    named = set(m.named_calls(*DEVICE_CALLS))
    named.update(m.parent[k] for k in m.of_type(ast.keyword) if k.arg == "device_ids")  # DDP(..., device_ids=)
    for call in m.calls:
        if call not in named:
            continue  # no device call and no device_ids=: nothing to read (most calls; no node read)
        for index in device_indices(call):
            if is_global_rank(m, index, m.bound_to(m.scope(call), is_global_rank_expr)):
                yield index, unparse(index)
    cuda_prefixes = {m.parent.get(n) for text, found in m.strings().items() if text.endswith("cuda:")
                     for n in found}  # the f-strings with a "cuda:" part
    for node in m.of_type(ast.JoinedStr):  # f"cuda:{rank}"
        if node not in cuda_prefixes:
            continue
        for before, value in zip(node.values, node.values[1:]):
            if isinstance(before, ast.Constant) and str(before.value).endswith("cuda:") and \
                    isinstance(value, ast.FormattedValue) and \
                    is_global_rank(m, value.value, m.bound_to(m.scope(node), is_global_rank_expr)):
                yield value.value, unparse(value.value)


NODE_ENV = frozenset({"NODE_RANK", "GROUP_RANK", "SLURM_NODEID", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"})
NODE_WORD = re.compile(r"(?<![A-Za-z0-9])(?:n_?nodes|num_nodes|node_rank|node_id|machine_rank|num_machines)"
                       r"(?![A-Za-z0-9])", re.I)  # in a name, attribute, parameter or option (dashes read as _)
SHORT_NODE_WORDS = ("nodes", "nr")  # only as an option (--nodes, -nr) or an option's attribute (args.nodes)
OPTION_HOLDERS = frozenset({"args", "opt", "opts", "config", "cfg", "conf", "hparams", "params", "flags", "FLAGS"})


def shows_several_nodes(m):
    """Whether the program shows that it runs on several nodes: it reads a node's rank or the number of nodes,
    from the environment (NODE_RANK, GROUP_RANK, SLURM_NODEID, SLURM_NNODES, SLURM_JOB_NUM_NODES, through
    os.environ[...], .get or getenv) or by name (an option, parameter, attribute or variable named like nnodes,
    num_nodes, n_nodes, node_rank, node_id, machine_rank, num_machines; the option --nodes or -nr / --nr of the
    pytorch DDP tutorial, or args.nodes, args.nr). Read in this file, or in any file of its folder (driver)."""
    if getattr(m.folder_call_names, "several_nodes", False):
        return True
    if not hasattr(m, "_several_nodes"):
        m._several_nodes = env_reads_nodes(m) or any(
            NODE_WORD.search(word) for word in {n.id for n in m.of_type(ast.Name)} |
            {n.arg for n in m.of_type(ast.arg)} | {n.attr for n in m.of_type(ast.Attribute)}) or any(
            n.attr in SHORT_NODE_WORDS and dotted(n.value) in OPTION_HOLDERS for n in m.of_type(ast.Attribute)) or any(
            isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-") and (
                NODE_WORD.search(a.value.lstrip("-").replace("-", "_")) or a.value.lstrip("-") in SHORT_NODE_WORDS)
            for c in m.named_calls("add_argument") for a in c.args)
    return m._several_nodes


def env_reads_nodes(m):
    """Whether the file reads a node variable of the environment: os.environ["NODE_RANK"], .get, getenv."""
    strings = m.strings()
    for name in NODE_ENV & set(strings):
        for node in strings[name]:
            parent = m.parent.get(node)
            if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Load) and \
                    dotted(parent.value).endswith("environ"):
                return True
            if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node and \
                    dotted(parent.func).endswith(("environ.get", "getenv")):
                return True
    return False


def rule_global_rank_as_device(m):
    """DDP001: a global rank used as a device index, in a program that shows no launch across nodes.

    Advice: wrong only on a second node ('invalid device ordinal'), a launch this program does not show.
    """
    found = global_rank_devices(m)
    if found and not shows_several_nodes(m):
        yield from ((node, "DDP001", detail) for node, detail in found)


def rule_global_rank_as_device_across_nodes(m):
    """DDP026: a global rank used as a device index, in a program that shows it runs on several nodes.

    Error: a crash ('invalid device ordinal') or two processes on one GPU, on every node after the first.
    """
    found = global_rank_devices(m)
    if found and shows_several_nodes(m):
        yield from ((node, "DDP026", detail) for node, detail in found)


def rule_nccl_hard_coded(m):
    """DDP012: init_process_group("nccl") with no CPU alternative around it.

    Advice: portability: a GPU-only script is right to name NCCL; only a CPU run needs another backend.
    """
    if "gloo" in m.strings():
        return  # the file has a CPU path somewhere
    for call in m.named_calls("init_process_group"):
        backend = call.args[0] if call.args else keyword(call, "backend")
        if not (isinstance(backend, ast.Constant) and isinstance(backend.value, str) and
                backend.value.lower().startswith("nccl")):
            continue
        if any(text_mentions(a.test, re.compile(r"cuda|is_available|gpu|device|backend", re.I))
               for a, _ in m.enclosing_ifs(call)):
            continue
        yield backend, "DDP012", ""


def hard_coded_gpus(m, value):
    """A GPU list written in the script: a string constant ("0,2"), or an argparse option whose default is one
    (`--gpu_id` default '0,2', as in the source post). Not "" or "-1" (every GPU hidden: the way to make a run
    use the CPU), and not a value the doctor cannot read (a function's parameter, a rank: an MPI or SLURM task's
    own GPU, a configuration file's entry)."""
    def gpu_list(node):
        return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip() not in ("", "-1")
    if gpu_list(value):
        return True
    if isinstance(value, ast.Attribute):
        for call in m.named_calls("add_argument"):
            flags = [a.value.lstrip("-").replace("-", "_") for a in call.args
                     if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if value.attr in flags or is_const(keyword(call, "dest"), value.attr):
                return gpu_list(keyword(call, "default"))
    return False


def rule_cuda_visible_devices(m):
    """DDP013: os.environ["CUDA_VISIBLE_DEVICES"] = ... (or setdefault / update / putenv) in the script.

    Advice: wrong only on a launch with another GPU list (a scheduler's), or once CUDA started: not shown.
    """
    setters = set(m.named_calls(*[name for name in m.calls_named if name.endswith(("setdefault", "putenv", "update"))]))
    for node in m.of_type(ast.Assign, ast.AugAssign, *([ast.Call] if setters else [])):  # (the calls: only setters)
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Subscript) and dotted(target.value).endswith("environ") and \
                        is_const(target.slice, "CUDA_VISIBLE_DEVICES") and hard_coded_gpus(m, node.value) and \
                        not chosen_by_launcher(m, node, node.value):
                    yield target, "DDP013", ""
        elif node in setters:
            name = dotted(node.func)
            if name.endswith(("environ.setdefault", "putenv")) and node.args and \
                    is_const(node.args[0], "CUDA_VISIBLE_DEVICES") and len(node.args) > 1 and \
                    hard_coded_gpus(m, node.args[1]) and not chosen_by_launcher(m, node, node.args[1]):
                yield node, "DDP013", ""
            elif name.endswith("environ.update") and any(k.arg == "CUDA_VISIBLE_DEVICES" for k in node.keywords):
                yield node, "DDP013", ""


def chosen_by_launcher(m, node, value):
    """A command-line option (`os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu`) set by the process that then
    starts the workers itself (mp.spawn, start_processes, Process, later in the same function or module): the
    person who runs the script chooses the GPUs, before any worker exists; a list written as a string is not."""
    if not isinstance(value, ast.Attribute):
        return False
    scope = m.scope(node)
    return any(m.scope(c) is scope and c.lineno > node.lineno
               for c in m.named_calls("spawn", "start_processes", "Process"))


def rule_legacy_local_rank_argument(m):
    """DDP014: parser.add_argument("--local_rank") whose default does not come from LOCAL_RANK.

    Advice: style: the legacy launcher's option; harmless where the script reads LOCAL_RANK anyway.
    """
    for call in m.named_calls("add_argument"):
        flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        legacy = [f for f in flags if f in ("--local_rank", "--local-rank")]
        if not legacy:
            continue
        default = keyword(call, "default")
        if default is not None and text_mentions(default, re.compile(r"^LOCAL_RANK$")):
            continue
        yield call, "DDP014", legacy[0]
