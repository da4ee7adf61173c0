"""12 · Uneven inputs: ranks with different numbers of batches, DDP's Join, and why rank 0 alone must
not call ddp_model. Without flags it runs correctly.

    torchrun --standalone --nproc_per_node=2 12_uneven_inputs.py                    # Join: exits 0
    torchrun --standalone --nproc_per_node=2 12_uneven_inputs.py --no-join --timeout 5    # times out
    torchrun --standalone --nproc_per_node=2 12_uneven_inputs.py --even-files --no-join \
        --eval-through-ddp --timeout 5                       # 04's program, rank 0 evaluating badly
    python 12_uneven_inputs.py      # also works: a world of one process

Rank r reads "file" r of the training set, and the files have different lengths (rank r's is r + 1
parts long), so the ranks run out of batches at different steps. Join([ddp_model]) lets the ranks that
ran out shadow the collectives of those still training; --no-join leaves it out. The model has a
BatchNorm layer, whose statistics are buffers: DDP broadcasts them at the start of every training
forward and of the first no_grad forward after one, so that forward through ddp_model is a
collective, and --eval-through-ddp makes rank 0 alone call it.
Rank 0 then replays the whole run in one process, on its own device, with the averaging rule written
out, and reports how far DDP's weights are from it. TF32 is off (on recent GPUs cuDNN convolutions
use it by default), so both sides compute in float32.

Devices: NCCL and one GPU per process where CUDA has a GPU for every process on the machine, gloo
and the CPU otherwise or with --device cpu (choose_device). Run by this series' tests on the CPU with
gloo, 1 to 3 processes; the GPU path is checked by tools/gpu_check.py (README, "Verified on").

Written by notebooks/12_real_data.ipynb — edit it there.
"""

import argparse
import copy
import datetime
import gc
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, Subset, TensorDataset

NUM_CLASSES = 10


def rank_file(dataset, rank, world_size, even):
    """Rank `rank`'s part of the data, as if each rank read its own file. Uneven: file r is r + 1 parts
    long, no padding, no sample twice, so the ranks have different numbers of batches. Even: every file
    len(dataset) // world_size long, the remainder dropped."""
    if even:
        length = len(dataset) // world_size
        return Subset(dataset, range(rank * length, (rank + 1) * length))
    parts = world_size * (world_size + 1) // 2  # 1 + 2 + ... + world_size
    start = len(dataset) * (rank * (rank + 1) // 2) // parts
    end = len(dataset) * ((rank + 1) * (rank + 2) // 2) // parts
    return Subset(dataset, range(start, end))


class ModelWithBatchNorm(nn.Module):
    """04's model with a BatchNorm layer: running_mean, running_var and num_batches_tracked are buffers,
    state that is not a parameter and that DDP broadcasts from one rank at the start of a forward (every
    training forward, and the first no_grad forward after one)."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv2d = nn.Conv2d(3, 16, 3)
        self.norm = nn.BatchNorm2d(16)
        self.fc = nn.Linear(30 * 30 * 16, num_classes)

    def forward(self, x):
        return self.fc(self.norm(self.conv2d(x)).flatten(1))


def train_uneven(ddp_model, loader, optimizer, device, use_join, divide_by_initial_world_size):
    """One pass over this rank's file. With Join, a rank that runs out of batches waits at the context's
    exit and shadows the collectives of the ranks still training (it adds zeros to their gradient
    all-reduce) until every rank is out; then the last to finish broadcasts its model to all. Without
    Join (enable=False) it leaves at once. Returns (steps, loss sum, samples) of this rank."""
    loss_fn = nn.CrossEntropyLoss()
    steps, total_loss, seen = 0, 0.0, 0
    ddp_model.train()
    with Join([ddp_model], enable=use_join, divide_by_initial_world_size=divide_by_initial_world_size):
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            loss = loss_fn(ddp_model(images), labels)  # DDP's training forward starts with collectives (buffers)
            optimizer.zero_grad()
            loss.backward()  # the gradient all-reduce: every rank still training meets here
            optimizer.step()
            steps += 1
            total_loss += loss.item() * len(labels)
            seen += len(labels)
        print(f"[rank {dist.get_rank()}] out of data after {steps} steps", flush=True)
    return steps, total_loss, seen


def replay_by_hand(initial_state, files, batch_size, lr, divide_by_initial_world_size, device):
    """The same training in one process, on `device` (rank 0's), with the averaging rule written out: at
    step t the gradient is the sum of the gradients of the ranks that still have a batch t, divided by the
    world size (or by the number of those ranks). Returns the final parameters, to compare with DDP's."""
    model = ModelWithBatchNorm(NUM_CLASSES).to(device)
    model.load_state_dict(initial_state)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    batches = [list(DataLoader(file, batch_size=batch_size)) for file in files]
    for step in range(max(len(b) for b in batches)):
        active = [b[step] for b in batches if step < len(b)]
        divisor = len(files) if divide_by_initial_world_size else len(active)
        optimizer.zero_grad()
        for images, labels in active:
            (loss_fn(model(images.to(device)), labels.to(device)) / divisor).backward()  # adds to .grad
        optimizer.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@torch.no_grad()
def count_correct(model, loader, device):
    """(correct, seen) on this loader. Counts, not a ratio, so that ranks can add them up."""
    model.eval()
    correct, seen = 0, 0
    for images, labels in loader:
        correct += (model(images.to(device)).argmax(1) == labels.to(device)).sum().item()
        seen += len(labels)
    return correct, seen


def digest(tensors):
    """A short fingerprint of some tensors: equal digests, equal tensors."""
    data = b"".join(t.detach().cpu().contiguous().numpy().tobytes() for t in tensors)
    return hashlib.sha256(data).hexdigest()[:16]


def evaluate_two_ways(model, ddp_model, val_set, device, through_ddp, batch_size=8):
    """Correct validation counts, two ways, over the same batches. 1: rank 0 alone, every batch, with
    `model`, the module inside DDP: a plain forward, no collective ((0, 0) on the other ranks). 2: every
    rank every world_size-th batch (no padding, no sample twice), the counts summed. Each sample goes
    through the same model in the same batch both ways, so the two counts are equal, not merely close."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # The same model everywhere: DDP broadcasts buffers at the START of a forward, so after the last step each
    # rank's BatchNorm statistics include its own last batch. (Join's final broadcast made them equal already.)
    for buffer in model.buffers():
        dist.broadcast(buffer, src=0)
    batches = list(BatchSampler(SequentialSampler(val_set), batch_size, drop_last=False))
    rank0 = (0, 0)
    if rank == 0:
        evaluated = ddp_model if through_ddp else model  # --eval-through-ddp: the forward is a collective
        rank0 = count_correct(evaluated, DataLoader(val_set, batch_sampler=batches), device)
    mine = count_correct(model, DataLoader(val_set, batch_sampler=batches[rank::world_size]), device)
    every_rank = sum_over_ranks(*mine, device=device)
    return rank0, [round(n) for n in every_rank]


def probe_buffer_sync(ddp_model, images):
    """What decides whether a forward through ddp_model broadcasts buffers, around two forwards under no_grad,
    run on every rank together (each may be a collective). DDP's _pre_forward broadcasts when
    will_sync_module_buffers() is True; _post_forward sets it True after a forward with grad enabled, False
    after any other. Join leaves its config on the model: with enable=True every forward all-reduces too,
    asynchronously, and outside a backward nothing waits for those all-reduces. So the probe first turns it off:
    Join's constructor rewrites the config of the modules it is given."""
    join_config = ddp_model._join_config._asdict()  # as the Join block left it
    Join([ddp_model], enable=False)  # no join all-reduces in the forwards below
    ddp_model.eval()
    before = ddp_model.will_sync_module_buffers()  # as the last training forward left it
    with torch.no_grad():
        ddp_model(images)  # broadcasts (before was True) ...
        after_one = ddp_model.will_sync_module_buffers()
        ddp_model(images)  # ... this one does not
        after_two = ddp_model.will_sync_module_buffers()
    return dict(join_config=join_config, before_no_grad_forward=before,
                after_one_no_grad_forward=after_one, after_two_no_grad_forwards=after_two)


def train_and_evaluate(args, device):
    """Train one pass over the files, evaluate two ways, and on rank 0 check the averaging rule by hand."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    started = time.perf_counter()
    # float32 means float32 here: on Ampere and later GPUs cuDNN convolutions default to TF32 (a 10-bit
    # mantissa), enough to move weights by more than the replay's tolerance. Both switches, before any work.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    train_set, val_set = make_datasets(args.dataset_size, NUM_CLASSES, args.seed)
    files = [rank_file(train_set, r, world_size, args.even_files) for r in range(world_size)]
    loader = DataLoader(files[rank], batch_size=args.batch_size)
    model = ModelWithBatchNorm(NUM_CLASSES).to(device)
    initial_state = copy.deepcopy(model.state_dict())
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=args.lr, momentum=0.9)
    print(f"[rank {rank}] {len(files[rank])} samples: {len(loader)} batches of up to {args.batch_size}", flush=True)

    divide_by_initial = not args.divide_by_remaining
    steps, loss_sum, seen = train_uneven(ddp_model, loader, optimizer, device, not args.no_join, divide_by_initial)
    loss_sum, seen = sum_over_ranks(loss_sum, seen, device=device)  # after the Join: every rank is here
    ranks = [None] * world_size  # each rank's own numbers after training, gathered to rank 0 for the report
    dist.all_gather_object(ranks, dict(rank=rank, samples=len(files[rank]), steps=steps,
                                       model=digest(model.state_dict().values()),  # parameters and buffers
                                       momentum=digest(s["momentum_buffer"] for s in optimizer.state.values())))
    (rank0_correct, rank0_seen), (every_rank_correct, every_rank_seen) = evaluate_two_ways(
        model, ddp_model, val_set, device, args.eval_through_ddp)
    buffer_sync = probe_buffer_sync(ddp_model, val_set[:8][0].to(device))  # every rank: after the evaluation
    if rank != 0:
        return

    final = torch.cat([p.detach().flatten() for p in model.parameters()])
    max_difference = {rule: (final - replay_by_hand(initial_state, files, args.batch_size, args.lr,
                                                    rule == "initial_world_size", device)).abs().max().item()
                      for rule in ("initial_world_size", "remaining_ranks")}
    print(f"steps per rank {[r['steps'] for r in ranks]}, loss {loss_sum / seen:.4f}, val correct "
          f"{rank0_correct}/{rank0_seen} (rank 0) and {every_rank_correct}/{every_rank_seen} (every rank); largest "
          f"difference from the averaging rule by hand: {max_difference}", flush=True)
    print(f"after the Join block: {buffer_sync}", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(dict(
            world_size=world_size, backend=dist.get_backend(), device=str(device), join=not args.no_join,
            even_files=args.even_files, divide_by_initial_world_size=divide_by_initial, ranks=ranks,
            batch_size=args.batch_size, train_loss=loss_sum / seen, train_samples=seen,
            max_difference_from_rule=max_difference, replay_device=str(device),
            tf32=dict(cudnn=torch.backends.cudnn.allow_tf32, matmul=torch.backends.cuda.matmul.allow_tf32),
            val_correct_rank0=rank0_correct, val_seen_rank0=rank0_seen,
            val_correct_every_rank=every_rank_correct, val_seen_every_rank=every_rank_seen, buffer_sync=buffer_sync,
            seconds=time.perf_counter() - started), indent=1))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-join", action="store_true", help="train without Join: the ranks with more batches hang")
    parser.add_argument("--even-files", action="store_true",
                        help="every rank's file equally long (the remainder dropped), as in lesson 04")
    parser.add_argument("--eval-through-ddp", action="store_true",
                        help="rank 0 alone evaluates through ddp_model instead of model: a collective")
    parser.add_argument("--divide-by-remaining", action="store_true",
                        help="Join(divide_by_initial_world_size=False): average over the ranks still training")
    parser.add_argument("--batch-size", type=positive_int, default=16, help="per process")
    parser.add_argument("--dataset-size", type=positive_int, default=101, help="training samples, all files")
    parser.add_argument("--lr", type=positive_float, default=0.01)
    parser.add_argument("--seed", type=non_negative_int, default=0)
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto",
                        help="auto: NCCL and one GPU per process where CUDA exists, else gloo and the CPU; "
                             "cpu: gloo and the CPU")
    parser.add_argument("--timeout", type=positive_float, default=60.0, help="seconds a collective may wait")
    parser.add_argument("--out", type=writable_file, help="rank 0 writes what it measured to this JSON file")
    args = parser.parse_args()
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    parts = world_size if args.even_files else world_size * (world_size + 1) // 2  # rank_file's parts
    if args.dataset_size < parts:
        parser.error(f"--dataset-size must be at least {parts} with {world_size} process(es): a sample per file")
    return args


def main():
    args = parse_args()
    device = setup_distributed(args.timeout, args.device)
    try:
        train_and_evaluate(args, device)
    except BaseException:
        dist.destroy_process_group()  # no barrier here: the other ranks may be gone
        raise
    clean_exit()


# ---- Plumbing shared with lesson 04's script (explained there): arguments, data, device, process group, exit ----

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


def make_datasets(train_size, num_classes, seed):
    """Synthetic, learnable data: image = 0.1 * template[label] + noise. Same seed, same data."""
    generator = torch.Generator().manual_seed(seed)
    templates = torch.randn(num_classes, 3, 32, 32, generator=generator)
    val_size = max(train_size // 4, num_classes)
    labels = torch.randint(num_classes, (train_size + val_size,), generator=generator)
    images = 0.1 * templates[labels] + torch.randn(len(labels), 3, 32, 32, generator=generator)
    return (TensorDataset(images[:train_size], labels[:train_size]),
            TensorDataset(images[train_size:], labels[train_size:]))


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


def sum_over_ranks(*numbers, device):
    """Each number summed over all ranks in one all_reduce: every rank gets the same global totals."""
    totals = torch.tensor(numbers, dtype=torch.float64, device=device)
    dist.all_reduce(totals, op=dist.ReduceOp.SUM)
    return totals.tolist()


def clean_exit():
    """Leave the process group so that every rank exits 0. With gloo, a bare destroy_process_group() can
    abort the process ("terminate called without an active exception") after the work is done: collect
    what still holds the group (DDP's reducer), wait for every rank, then destroy."""
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
