"""13 · A model built on the meta device, and sharded checkpoints: save from N ranks, load into M.

    torchrun --standalone --nproc_per_node=2 13_sharded_checkpoint.py --save ckpt      # train, then save
    torchrun --standalone --nproc_per_node=4 13_sharded_checkpoint.py --load ckpt      # load into 4 ranks
    python 13_sharded_checkpoint.py --load ckpt                                        # or into one

Both modes first build the FSDP2 model of 13_zero_fsdp.py twice and count each rank's bytes at every
step: the naive way (the whole model on every rank, then fully_shard) and the way a model that does
not fit is built (on the meta device, fully_shard, to_empty, then each shard initialised), and check
whether the two initialisations agree.

--save trains the naive model for --steps Adam steps, then saves its model and optimizer twice: with
DCP, each rank writing its own shards in parallel (ckpt/dcp/), and as lesson 05 does, gathered into
one full copy on rank 0 and written with torch.save (ckpt/full.pt, atomic). It also shows what
ZeRO-1's optimizer needs to be saved that way (consolidate_state_dict).
--load builds the model on meta on however many ranks it runs on and loads it twice: ckpt/full.pt,
read by rank 0 alone and broadcast (broadcast_from_rank0), and ckpt/dcp/ (DCP reshards: any number of
ranks can read what any number wrote). Each time it gathers the result and compares it with
ckpt/full.pt, tensor by tensor, for equality.

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/13_sharding.ipynb — edit it there.
"""

import argparse
import datetime
import gc
import json
import math
import os
import sys
import tempfile
import time
import weakref
from collections import Counter
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_leaves
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)  # everything gathered, on rank 0's CPU
BROADCAST = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)  # rank 0's full copy, to every shard


class LiveBytes(TorchDispatchMode):
    """Counts, per device type, the bytes of the real (not meta) tensor storages that PyTorch operations
    create while it is active, for as long as they live, and the most alive at once (the peak).

    Every operation's result passes through __torch_dispatch__: a storage seen for the first time is
    counted, and uncounted when it is freed (a weakref finalizer). Not seen: storages made outside
    PyTorch's operators (torch.load's: add them with track()), the backend's own buffers (gloo's,
    NCCL's), the allocator's rounding and cache, Python objects, and what existed before it started."""

    def __init__(self):
        super().__init__()
        self.live, self.peak, self.counted, self.steps = Counter(), Counter(), set(), []

    def track(self, tree):
        """Count the storages of every tensor in a nested structure (once each)."""
        for tensor in (t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)):
            for storage in storages(tensor):
                if id(storage) not in self.counted:
                    self.counted.add(id(storage))
                    kind, size = storage.device.type, storage.nbytes()
                    self.live[kind] += size
                    self.peak[kind] = max(self.peak[kind], self.live[kind])
                    weakref.finalize(storage, self._freed, id(storage), kind, size)

    def _freed(self, key, kind, size):
        self.counted.discard(key)
        self.live[kind] -= size

    def mark(self, step, model):
        """Record the bytes alive now and the peak since the previous step, then start the next step."""
        self.steps.append(dict(step=step, live=dict(self.live), peak=dict(self.peak), model=parameter_bytes(model)))
        self.peak = Counter(self.live)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        self.track(result)
        return result


def storages(tensor):
    """The real storages behind a tensor: a DTensor's local shard's; none for a meta tensor."""
    found, todo = [], [tensor]
    while todo:
        t = todo.pop()
        if is_traceable_wrapper_subclass(t):  # a DTensor: look inside, at its local tensor
            todo.extend(inner for name in t.__tensor_flatten__()[0]
                        if isinstance(inner := getattr(t, name), torch.Tensor))
        elif not t.is_meta:  # a meta tensor has a shape, but no memory behind it
            found.append(t.untyped_storage())
    return found


def storage_bytes(tree):
    """Bytes of the distinct storages behind the tensors of a nested structure (a view keeps all of its storage)."""
    unique = {s.data_ptr(): s.nbytes() for t in tree_leaves(tree) if isinstance(t, torch.Tensor) for s in storages(t)}
    return sum(unique.values())


def parameter_bytes(model):
    """Bytes of the storages behind the model's parameters (FSDP2 keeps a shard's rows padded)."""
    return storage_bytes(list(model.parameters()))


def peak(steps):
    """The most bytes alive at once, on any one device, over a build's steps."""
    return max(max(step["peak"].values(), default=0) for step in steps)


def shard(model, mesh):
    """FSDP2 as in 13_zero_fsdp.py: a group per hidden layer, then the root (the head)."""
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)


def build_naive(args, device, mesh, seed, meter):
    """How this lesson's models were built so far: every rank makes the whole model, then shards it."""
    torch.manual_seed(seed)
    model = DeepMLP(args.width, args.layers, args.num_classes)  # every parameter, initialised, in CPU memory
    meter.mark("DeepMLP(...)", model)
    model.to(device)  # the whole model on this rank's device: for a model that does not fit, this step fails
    meter.mark(".to(device)", model)
    shard(model, mesh)  # only now is each parameter cut to this rank's rows, and the rest freed
    meter.mark("fully_shard", model)
    return model


def build_on_meta(args, device, mesh, seed, meter):
    """How a model that does not fit is built: shapes first, memory for this rank's shard only."""
    with torch.device("meta"):  # parameters with shapes and dtypes, and no memory
        model = DeepMLP(args.width, args.layers, args.num_classes)
    meter.mark("DeepMLP(...) on meta", model)
    shard(model, mesh)  # each parameter becomes a DTensor of this rank's rows: still on meta
    meter.mark("fully_shard", model)
    model.to_empty(device=device)  # memory for this rank's rows, uninitialised: the first real bytes
    meter.mark("to_empty", model)
    torch.manual_seed(seed)
    for module in model.modules():  # each layer's own initialisation, on the rows this rank holds
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    meter.mark("reset_parameters", model)
    return model


def peak_cuda_bytes(device, build):
    """build()'s result, and torch.cuda.max_memory_allocated while it ran (on GPUs; None on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    result = build()
    return result, (torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None)


def compare_builds(args, device, mesh):
    """Build the model both ways with the same seed; each rank's bytes at every step; are the weights equal?"""
    with LiveBytes() as naive_meter:
        naive, naive_cuda = peak_cuda_bytes(device, lambda: build_naive(args, device, mesh, args.seed, naive_meter))
    with LiveBytes() as meta_meter:
        on_meta, meta_cuda = peak_cuda_bytes(device, lambda: build_on_meta(args, device, mesh, args.seed, meta_meter))
    naive_state, meta_state = naive.state_dict(), on_meta.state_dict()
    equal = [name for name in naive_state  # full_tensor() gathers a DTensor: every rank calls it
             if torch.equal(naive_state[name].full_tensor(), meta_state[name].full_tensor())]
    # Where did each rank's rows of the first weight come from? Compare them with the naive weight's first rows.
    first = next(iter(naive_state))
    mine = meta_state[first].to_local()
    from_first_rows = torch.equal(mine, naive_state[first].full_tensor()[:len(mine)])
    record = dict(naive=naive_meter.steps, meta=meta_meter.steps, naive_cuda_max=naive_cuda, meta_cuda_max=meta_cuda,
                  rows_equal_naive_first_rows=from_first_rows)
    return naive, dict(ranks=gather_from_every_rank(record), equal_tensors=equal, tensors=len(naive_state),
                       first_tensor=first, row_copies={name: row_copies(meta_state[name].full_tensor())
                                                       for name in meta_state})


def row_copies(tensor):
    """For each row (element, for a vector) of a tensor: the index of the first row equal to it, itself if none
    before it is. Distinct rows give [0, 1, 2, ...]; a tensor of N stacked copies repeats one block of indices."""
    rows = tensor.detach().cpu().reshape(len(tensor), -1)
    return [next(i for i in range(j + 1) if torch.equal(rows[i], rows[j])) for j in range(len(rows))]


def rows_held(model, path):
    """Which rows of full.pt each of this rank's parameter shards holds after the load: every offset s at which
    the file's tensor, rows s to s + len(shard), equals the shard (read back from the file for this check only)."""
    saved = torch.load(path, map_location="cpu", weights_only=True)["model"]
    held = {}
    for name, p in model.named_parameters():
        mine, full = p.to_local().detach().cpu(), saved[name]
        held[name] = dict(rows=len(mine), offsets=[s for s in range(len(full) - len(mine) + 1)
                                                   if torch.equal(full[s:s + len(mine)], mine)] if len(mine) else [])
    return held


def tensors_in(tree):
    """Every tensor in a nested state dict, with its path: ("optim/state/blocks.0.0.weight/exp_avg", t), ..."""
    if torch.is_tensor(tree):
        yield "", tree
    elif isinstance(tree, dict):
        for key, value in tree.items():
            for path, tensor in tensors_in(value):
                yield f"{key}/{path}".rstrip("/"), tensor
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            for path, tensor in tensors_in(value):
                yield f"{i}/{path}".rstrip("/"), tensor


def local_bytes(tree):
    """Bytes this rank holds of a state dict: a DTensor's local shard, or the whole tensor."""
    held = (t.to_local() if isinstance(t, DTensor) else t for _, t in tensors_in(tree))
    return sum(t.numel() * t.element_size() for t in held)


def timed(work, device):
    """work()'s result, and its seconds on the slowest rank (a save ends when the last rank has written)."""
    dist.barrier()
    started = time.perf_counter()
    result = work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    took = torch.tensor([time.perf_counter() - started], dtype=torch.float64, device=device)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)  # a timing, not a metric: the slowest rank's
    return result, took.item()


def save_full_on_rank_0(model, optimizer, path):
    """Lesson 05's way: gather everything into one process (collectives: every rank calls this), which
    writes it to a temporary file and renames it; the others wait. Returns the bytes this rank held: of the
    tensors, and of the storages behind them (what torch.save writes: a view's whole storage)."""
    model_full, optimizer_full = get_state_dict(model, optimizer, options=FULL)  # empty on ranks > 0
    full = {"model": model_full, "optim": optimizer_full}
    if dist.get_rank() == 0:
        temporary = path.with_name(path.name + ".tmp")
        torch.save(full, temporary)
        os.replace(temporary, path)  # atomic: a crash of the process leaves no half file (no fsync: not a power loss)
    dist.barrier()
    return local_bytes(full), storage_bytes(full)


def zero_optimizer_state(args, device):
    """ZeRO-1's optimizer state in one file: get_state_dict refuses it, consolidate_state_dict gathers it."""
    torch.manual_seed(args.seed)
    model = DDP(DeepMLP(args.width, args.layers, args.num_classes).to(device),
                device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=args.lr)
    train(model, optimizer, args, device)
    try:
        get_state_dict(model, optimizer)  # asks the optimizer for its state_dict(): ZeRO's refuses, on every rank
        refused = None
    except RuntimeError as error:
        refused = str(error)
    optimizer.consolidate_state_dict(to=0)  # every rank: each sends its share of Adam's state to rank 0
    try:
        state = optimizer.state_dict()  # rank 0: the whole state, keyed by parameter index; others refuse
        held = dict(bytes=local_bytes(state["state"]), tensors=len(state["state"]))
    except RuntimeError:
        held = None
    return dict(get_state_dict_error=refused, held_after_consolidate=gather_from_every_rank(held))


def save(args, device):
    """Build both ways; train the naive build, save with DCP (every rank its own shards), then as lesson 05 does."""
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    model, builds = compare_builds(args, device, mesh)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    train(model, optimizer, args, device)
    model_state, optimizer_state = get_state_dict(model, optimizer)  # DTensors: each rank's shards
    sharded = {"model": model_state, "optim": optimizer_state}
    _, dcp_s = timed(lambda: dcp.save(sharded, checkpoint_id=args.save / "dcp"), device)
    (full_bytes, full_storage), full_s = timed(lambda: save_full_on_rank_0(model, optimizer, args.save / "full.pt"),
                                               device)
    held = gather_from_every_rank(dict(sharded=local_bytes(sharded), full=full_bytes, full_storage=full_storage))
    files = {p.name: p.stat().st_size for p in sorted((args.save / "dcp").iterdir())}
    return dict(mode="save", builds=builds, dcp_seconds=dcp_s, full_seconds=full_s, bytes_held=held, dcp_files=files,
                full_file_bytes=(args.save / "full.pt").stat().st_size, zero=zero_optimizer_state(args, device))


def load_full_checkpoint(model, optimizer, path, meter):
    """Lesson 05's one file into a sharded model: rank 0 alone reads it; the others pass empty dicts and
    receive each tensor in turn by broadcast, keeping their own rows. Every rank calls both functions."""
    full = torch.load(path, map_location="cpu", weights_only=True) if dist.get_rank() == 0 else {}
    meter.track(full)  # torch.load makes its storages outside the operators the meter sees: counted by hand
    meter.mark("torch.load (rank 0)", model)
    set_model_state_dict(model, full.get("model", {}), options=BROADCAST)
    meter.mark("set_model_state_dict", model)
    set_optimizer_state_dict(model, optimizer, full.get("optim", {}), options=BROADCAST)
    meter.mark("set_optimizer_state_dict", model)
    del full
    meter.mark("checkpoint freed", model)


def unequal_to_file(model, optimizer, path):
    """Gather the model and optimizer (every rank calls this); on rank 0, the names whose tensors differ
    from the file's, and how many tensors the file holds."""
    model_full, optimizer_full = get_state_dict(model, optimizer, options=FULL)
    if dist.get_rank() != 0:
        return None, None, None
    saved = dict(tensors_in(torch.load(path, map_location="cpu", weights_only=True)))
    loaded = dict(tensors_in({"model": model_full, "optim": optimizer_full}))
    unequal = [name for name in saved if name not in loaded or not torch.equal(saved[name], loaded[name])]
    return unequal, len(saved), sorted(saved) == sorted(loaded)


def load(args, device):
    """Build on meta and load DIR/full.pt by broadcast from rank 0; build again and load DIR/dcp; compare both."""
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    _, builds = compare_builds(args, device, mesh)
    with LiveBytes() as meter:  # other initial weights than the checkpoint's: the load must replace them all
        model = build_on_meta(args, device, mesh, args.seed + 1, meter)
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
        load_full_checkpoint(model, optimizer, args.load / "full.pt", meter)
    broadcast_unequal, _, broadcast_same_names = unequal_to_file(model, optimizer, args.load / "full.pt")
    broadcast = dict(ranks=gather_from_every_rank(meter.steps), unequal=broadcast_unequal,
                     same_names=broadcast_same_names,
                     rows_held=gather_from_every_rank(rows_held(model, args.load / "full.pt")))
    del model, optimizer

    with LiveBytes() as meter:
        model = build_on_meta(args, device, mesh, args.seed + 1, meter)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model_state, optimizer_state = get_state_dict(model, optimizer)
    sharded = {"model": model_state, "optim": optimizer_state}
    _, dcp_s = timed(lambda: dcp.load(sharded, checkpoint_id=args.load / "dcp"), device)  # in place
    set_state_dict(model, optimizer, model_state_dict=sharded["model"], optim_state_dict=sharded["optim"])
    unequal, tensors, same_names = unequal_to_file(model, optimizer, args.load / "full.pt")
    held = gather_from_every_rank(dict(sharded=local_bytes(sharded)))
    return dict(mode="load", builds=builds, broadcast=broadcast, dcp_seconds=dcp_s, bytes_held=held,
                tensors=tensors, same_names=same_names, unequal=unequal)


def run(args, device):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    report = save(args, device) if args.save else load(args, device)
    if rank == 0:
        peaks = [(peak(r["naive"]), peak(r["meta"])) for r in report["builds"]["ranks"]]
        print(f"{world_size} rank(s) built the model: peak bytes per rank, naive vs on meta: "
              f"{', '.join(f'{naive:,} vs {meta:,}' for naive, meta in peaks)}")
        if args.save:
            print(f"{world_size} rank(s) saved {args.save}/dcp in {report['dcp_seconds']:.2f} s "
                  f"({len(report['dcp_files'])} files); rank 0 gathered and saved full.pt in "
                  f"{report['full_seconds']:.2f} s, holding {report['bytes_held'][0]['full']:,} B at once")
        else:
            print(f"{world_size} rank(s) loaded {args.load}/full.pt by broadcast from rank 0: "
                  f"{report['tensors'] - len(report['broadcast']['unequal'])} of {report['tensors']} tensors equal; "
                  f"{args.load}/dcp in {report['dcp_seconds']:.2f} s: "
                  f"{report['tensors'] - len(report['unequal'])} of {report['tensors']} tensors equal full.pt's")
        if args.out:
            shapes = [list(p.shape) for p in DeepMLP(args.width, args.layers, args.num_classes).parameters()]
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(dict(report, world_size=world_size, backend=dist.get_backend(),
                                                device=str(device), parameter_shapes=shapes), indent=1))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--save", type=writable_folder, metavar="DIR", help="train, then save into DIR")
    what.add_argument("--load", type=saved_checkpoint, metavar="DIR",
                      help="load DIR/full.pt by broadcast and DIR/dcp, and compare both with DIR/full.pt")
    parser.add_argument("--width", type=positive_int, default=256, help="features of every hidden layer")
    parser.add_argument("--layers", type=positive_int, default=8, help="hidden layers, one FSDP2 group each")
    parser.add_argument("--steps", type=positive_int, default=3, help="training steps before --save")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="per process")
    parser.add_argument("--dataset-size", type=positive_int, default=1024, help="training samples")
    parser.add_argument("--num-classes", type=class_count, default=10)
    parser.add_argument("--lr", type=positive_float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes what it measured to this JSON file")
    return parser.parse_args()


# ---- Plumbing shared with lesson 04's script (explained there); data, model and batches of 13_zero_fsdp.py ----


def positive_int(text):
    """An argparse type: a whole number > 0. A bad value is a one-line error and exit code 2."""
    value = int(text)  # not a whole number: argparse says "invalid positive_int value"
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text}")
    return value


def non_negative_int(text):
    """An argparse type: a whole number >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def class_count(text):
    """An argparse type: a number of classes, at least 2."""
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2, got {text}")
    return value


def positive_float(text):
    """An argparse type: a finite number > 0. (A check `value <= 0` lets nan through: nan <= 0 is False.)"""
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text}")
    return value


def writable_file(text):
    """An argparse type: a file we can create, checked at start-up, not after the training it would save."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: it is a folder")
    blocking = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocking:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {blocking} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass  # a file can be created there (and is removed again)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {error.strerror or error}") from None
    return path


def writable_folder(text):
    """An argparse type: a folder we can create files in, checked at start-up."""
    path = Path(text)
    blocking = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocking:
        raise argparse.ArgumentTypeError(f"cannot write to {text}: {blocking} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe."):
            pass  # a file can be created there (and is removed again)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write to {text}: {error.strerror or error}") from None
    return path


def saved_checkpoint(text):
    """An argparse type: a folder written by --save: its DCP metadata and its full copy are there."""
    path = Path(text)
    missing = [str(p) for p in (path / "dcp" / ".metadata", path / "full.pt") if not p.is_file()]
    if missing:
        raise argparse.ArgumentTypeError(f"{text} holds no checkpoint saved by --save (missing {', '.join(missing)})")
    return path


def choose_device(cuda_available, gpu_count, local_rank, local_world_size, wanted="auto"):
    """The device policy, a pure function of the machine: (backend, device) for this process.

    NCCL and cuda:LOCAL_RANK where CUDA has a GPU for every process on this machine; gloo and the CPU
    where there is no CUDA or --device cpu asks for it. Fewer GPUs than processes is an error said in
    one line, not "invalid device ordinal" from deep inside CUDA. Every rank of a machine sees the same
    inputs (only local_rank differs), so no rank picks NCCL while another picks gloo.
    """
    if wanted == "cpu" or not cuda_available or gpu_count == 0:
        return "gloo", "cpu"
    if gpu_count < local_world_size:
        raise ValueError(f"{local_world_size} processes on this machine but {gpu_count} GPU(s): launch with "
                         f"--nproc_per_node=gpu, or fewer processes (at most {gpu_count}), or add --device cpu")
    return "nccl", f"cuda:{local_rank}"


def setup_distributed(timeout_s, wanted_device):
    """Join the process group. NCCL and one GPU per process, or gloo and the CPU."""
    local_rank = int(os.environ.get("LOCAL_RANK", 0))  # this process's index on this machine
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", 1))  # processes on this machine
    try:
        backend, device = choose_device(torch.cuda.is_available(), torch.cuda.device_count(),
                                        local_rank, local_world_size, wanted_device)
    except ValueError as error:  # too few GPUs: one line and exit code 2, before any CUDA work
        if local_rank == 0:
            print(f"{Path(sys.argv[0]).name}: error: {error}", file=sys.stderr)
        sys.exit(2)
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # without it every process would also start a CUDA context on GPU 0
    timeout = datetime.timedelta(seconds=timeout_s)
    bound = device if device.type == "cuda" else None  # NCCL: connect now, and barrier() knows its GPU
    if "RANK" in os.environ:  # started by torchrun: join the group it prepared
        dist.init_process_group(backend, timeout=timeout, device_id=bound)
    else:  # plain `python`: a group of one, no network needed
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout,
                                device_id=bound)
    return device


def clean_exit():
    """Leave the process group so that every rank exits 0. With gloo, a bare destroy_process_group() can
    abort the process ("terminate called without an active exception") after the work is done: collect
    what still holds the group (DDP's reducer), wait for every rank, then destroy."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def gather_from_every_rank(record):
    """Every rank's record (a small picklable object), in rank order, on every rank."""
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, record)
    return everyone


def make_vectors(size, width, num_classes, seed):
    """Synthetic, learnable data: x = 0.5 * template[label] + noise, in `width` features. Same seed, same data."""
    generator = torch.Generator().manual_seed(seed)
    templates = torch.randn(num_classes, width, generator=generator)
    labels = torch.randint(num_classes, (size,), generator=generator)
    return TensorDataset(0.5 * templates[labels] + torch.randn(size, width, generator=generator), labels)


class DeepMLP(nn.Module):
    """`layers` equal hidden layers (the parameters of a large model, in equal slices) and a small head."""

    def __init__(self, width, layers, num_classes):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(layers))
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def batches(dataset, batch_size, seed):
    """This rank's batches, epoch after epoch (set_epoch each time), the same for every strategy."""
    sampler = DistributedSampler(dataset, shuffle=True, seed=seed)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    for epoch in range(sys.maxsize):
        sampler.set_epoch(epoch)
        yield from loader


def train(model, optimizer, args, device):
    loss_fn = nn.CrossEntropyLoss()
    data = batches(make_vectors(args.dataset_size, args.width, args.num_classes, args.seed), args.batch_size,
                   args.seed)
    for _ in range(args.steps):
        images, labels = next(data)
        loss = loss_fn(model(images.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        run(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


if __name__ == "__main__":
    main()
