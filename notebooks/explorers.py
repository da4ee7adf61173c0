"""Interactive explorers for the DDP lessons: plain, tested functions and thin ipywidgets views.

Lessons import it next to the notebook: ``from explorers import sampler_explorer``.

Each explorer has three layers, so that it teaches in JupyterLab, under papermill and in the
static HTML handout alike:

* a plain function that computes the answer with real PyTorch objects (tested in
  tests/test_explorers.py): ``sampler_shards``, ``ring_allreduce``, ``torchrun_plan``;
* a formatter that prints it as a plain text table (``format_shards``, ``format_ring``,
  ``format_plan``) or draws it with matplotlib (``ring_figure``);
* a widget (``sampler_explorer``, ``ring_explorer``, ``torchrun_explorer``): sliders and check
  boxes above an ``ipywidgets.HTML`` table. The table is recomputed by observers when a control
  moves, never by a button, so the widget is complete as soon as the cell runs. Its HTML is part
  of the widget state that papermill stores, which is why the handout shows the default view even
  without a kernel (the controls there are frozen).
"""

from __future__ import annotations

import html
import shlex
from dataclasses import dataclass, field

__all__ = [
    "Shards", "sampler_shards", "format_shards", "shards_html", "sampler_explorer",
    "RingState", "ring_allreduce", "rank_tensors", "format_ring", "ring_html", "ring_figure", "ring_explorer",
    "Worker", "Plan", "torchrun_plan", "format_plan", "plan_html", "torchrun_explorer",
]

# Colours shared by the HTML tables (explicit, so that they read the same in light and dark themes).
_PAD = "background:#ffd8a8;color:#7a3e00;font-weight:bold"   # a padding duplicate
_DONE = "background:#c3f0c8;color:#14521c"                    # a fully reduced chunk
_NEW = "outline:2px solid #1c7ed6;outline-offset:-2px"        # changed in this step
_HEAD = "background:#f1f3f5;color:#222"
_TABLE = "border-collapse:collapse;font-family:monospace;font-size:13px;margin:4px 0"
_CELL = "border:1px solid #ced4da;padding:2px 6px;text-align:right;color:#222;background:#fff"


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


# ---------------------------------------------------------------------------------------------
# 1. DistributedSampler: which indices does each rank get?
# ---------------------------------------------------------------------------------------------

@dataclass
class Shards:
    """The indices each rank's DistributedSampler yields, in order.

    ``indices[r]`` is what rank r iterates over; ``padding[r][i]`` is True where that index is a
    duplicate added so that every rank gets the same number of samples (drop_last=False);
    ``dropped`` lists the samples no rank sees (drop_last=True).
    """

    dataset_size: int
    world_size: int
    shuffle: bool
    seed: int
    epoch: int
    drop_last: bool
    indices: list[list[int]]
    padding: list[list[bool]]
    dropped: list[int] = field(default_factory=list)

    @property
    def num_samples(self) -> int:
        """Samples per rank (the length of each rank's epoch)."""
        return len(self.indices[0])

    @property
    def total_size(self) -> int:
        return self.num_samples * self.world_size

    @property
    def num_padding(self) -> int:
        return sum(map(sum, self.padding))


def sampler_shards(dataset_size: int, world_size: int, shuffle: bool = True, seed: int = 0,
                   epoch: int = 0, drop_last: bool = False) -> Shards:
    """Ask the real ``torch.utils.data.DistributedSampler`` of every rank for its indices.

    The padding marks follow the sampler's rule: it lays the (shuffled) indices out in one list,
    pads that list with its own first elements up to ``num_samples * world_size`` and deals it
    out round-robin, so rank r's i-th index sits at position ``i * world_size + r``; positions
    at or after ``dataset_size`` are padding.
    """
    from torch.utils.data import DistributedSampler

    _require(dataset_size >= 1, f"dataset_size must be >= 1, got {dataset_size}")
    _require(world_size >= 1, f"world_size must be >= 1, got {world_size}")
    _require(epoch >= 0, f"epoch must be >= 0, got {epoch}")
    dataset = range(dataset_size)  # anything with a length will do: the sampler only calls len()
    indices, padding = [], []
    for rank in range(world_size):
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=shuffle,
                                     seed=seed, drop_last=drop_last)
        sampler.set_epoch(epoch)
        mine = list(sampler)
        indices.append(mine)
        padding.append([i * world_size + rank >= dataset_size for i in range(len(mine))])
    seen = {i for rank in indices for i in rank}
    dropped = [i for i in range(dataset_size) if i not in seen]
    return Shards(dataset_size, world_size, shuffle, seed, epoch, drop_last, indices, padding, dropped)


def format_shards(shards: Shards) -> str:
    """A plain text table: one line per rank, padding duplicates marked with '*'."""
    s = shards
    width = max(len(str(s.dataset_size - 1)) + 1, 3)
    lines = [f"DistributedSampler: dataset_size={s.dataset_size} world_size={s.world_size} "
             f"shuffle={s.shuffle} seed={s.seed} epoch={s.epoch} drop_last={s.drop_last}",
             f"each rank gets {s.num_samples} {'index' if s.num_samples == 1 else 'indices'} ({s.total_size} in all)"]
    for rank, (mine, pads) in enumerate(zip(s.indices, s.padding, strict=True)):
        cells = "".join(f"{str(i) + ('*' if p else ''):>{width}}" for i, p in zip(mine, pads, strict=True))
        lines.append(f"rank {rank}:{cells}")
    if s.num_padding:
        lines.append(f"* padding: {s.num_padding} duplicate(s) of samples another rank already has")
    if s.dropped:
        lines.append(f"dropped by drop_last (no rank sees them): {s.dropped}")
    return "\n".join(lines)


def shards_html(shards: Shards) -> str:
    """The shards as an HTML table (rows = ranks, padding highlighted); data-* attributes for tests."""
    s = shards
    head = "".join(f'<th style="{_CELL};{_HEAD}">{i}</th>' for i in range(s.num_samples))
    rows = []
    for rank, (mine, pads) in enumerate(zip(s.indices, s.padding, strict=True)):
        cells = "".join(
            f'<td class="ddp-index{" ddp-padding" if p else ""}" style="{_CELL}{";" + _PAD if p else ""}"'
            f'{" title=padding duplicate" if p else ""}>{i}</td>'
            for i, p in zip(mine, pads, strict=True))
        rows.append(f'<tr class="ddp-rank" data-rank="{rank}"><th style="{_CELL};{_HEAD}">rank {rank}</th>{cells}</tr>')
    notes = [f"each rank gets <b>{s.num_samples}</b> indices; {s.total_size} in all for "
             f"{s.dataset_size} samples"]
    if s.num_padding:
        notes.append(f'<span style="{_PAD};padding:0 4px">{s.num_padding} padding duplicate(s)</span> '
                     "so that every rank runs the same number of steps")
    if s.dropped:
        notes.append(f"drop_last drops {len(s.dropped)} sample(s) no rank sees: {s.dropped}")
    if s.dataset_size and not s.shuffle:
        notes.append("shuffle=False: rank r gets r, r + world_size, r + 2·world_size, …")
    return (f'<div class="ddp-shards" data-world-size="{s.world_size}" data-dataset-size="{s.dataset_size}" '
            f'data-shuffle="{int(s.shuffle)}" data-seed="{s.seed}" data-epoch="{s.epoch}" '
            f'data-drop-last="{int(s.drop_last)}">'
            f'<table style="{_TABLE}"><tr><th style="{_CELL};{_HEAD}">position →</th>{head}</tr>'
            f'{"".join(rows)}</table><div style="font-size:13px">{"<br>".join(notes)}</div></div>')


def sampler_explorer(dataset_size: int = 10, world_size: int = 3, shuffle: bool = True, seed: int = 0,
                     epoch: int = 0, drop_last: bool = False, max_dataset_size: int = 40, max_world_size: int = 8):
    """Sliders and check boxes for the DistributedSampler's arguments above the table of shards."""
    import ipywidgets as w

    style = {"description_width": "9rem"}
    controls = {
        "dataset_size": w.IntSlider(dataset_size, min=1, max=max(max_dataset_size, dataset_size),
                                    description="dataset size", style=style),
        "world_size": w.IntSlider(world_size, min=1, max=max(max_world_size, world_size),
                                  description="world size", style=style),
        "seed": w.IntSlider(seed, min=0, max=max(9, seed), description="seed", style=style),
        "epoch": w.IntSlider(epoch, min=0, max=max(9, epoch), description="epoch (set_epoch)", style=style),
        "shuffle": w.Checkbox(shuffle, description="shuffle", indent=False, layout=w.Layout(width="auto")),
        "drop_last": w.Checkbox(drop_last, description="drop_last", indent=False, layout=w.Layout(width="auto")),
    }
    table = w.HTML()

    def update(_change=None):
        table.value = shards_html(sampler_shards(**{k: c.value for k, c in controls.items()}))

    for control in controls.values():
        control.observe(update, names="value")
    update()
    controls["drop_last"].layout.margin = "0 0 0 2rem"
    boxes = w.HBox([controls["shuffle"], controls["drop_last"]], layout=w.Layout(margin="0 0 0 9.5rem"))
    return w.VBox([*(controls[k] for k in ("dataset_size", "world_size", "seed", "epoch")), boxes, table])


# ---------------------------------------------------------------------------------------------
# 2. Ring all-reduce, step by step
# ---------------------------------------------------------------------------------------------

@dataclass
class RingState:
    """What every rank holds after one step of the ring.

    ``chunks[r][c]`` is rank r's copy of chunk c (a tensor); ``sources[r][c]`` the ranks whose
    inputs it already sums; ``transfers`` the (sender, receiver, chunk) messages of this step.
    """

    phase: str  # "start", "reduce-scatter" or "all-gather"
    step: int   # 1-based within the phase (0 for the start)
    chunks: list[list]
    sources: list[list[frozenset[int]]]
    transfers: list[tuple[int, int, int]]

    @property
    def title(self) -> str:
        return "start: every rank holds its own tensor" if self.phase == "start" else f"{self.phase} step {self.step}"

    def tensors(self) -> list:
        """Each rank's whole tensor (its chunks concatenated)."""
        import torch
        return [torch.cat(row) for row in self.chunks]


def rank_tensors(world_size: int, length: int | None = None, seed: int = 0) -> list:
    """Small integer-valued float tensors, one per rank, easy to add up by eye."""
    import torch

    _require(world_size >= 1, f"world_size must be >= 1, got {world_size}")
    length = 2 * world_size if length is None else length
    _require(length >= world_size, f"length must be >= world_size ({world_size}), got {length}")
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 10, (length,), generator=generator).float() for _ in range(world_size)]


def ring_allreduce(tensors: list) -> list[RingState]:
    """Run the ring all-reduce on real tensors and return the state after every step.

    With n ranks each tensor is cut into n chunks. Reduce-scatter: in step s (0-based) rank r
    sends chunk (r - s) mod n to rank r + 1, which adds it to its own copy; after n - 1 steps
    rank r holds the complete sum of chunk (r + 1) mod n. All-gather: in step s rank r sends
    chunk (r + 1 - s) mod n to rank r + 1, which overwrites its copy; after n - 1 more steps every
    rank holds every summed chunk. All sends of a step happen at once: each rank sends one chunk
    and receives one, so each sends 2(n - 1)/n of the tensor in all, whatever n is.
    """
    import torch

    n = len(tensors)
    _require(n >= 1, "need at least one tensor")
    _require(all(t.shape == tensors[0].shape for t in tensors), "all ranks must hold tensors of the same shape")
    _require(tensors[0].numel() >= n, "a tensor needs at least one element per rank")
    chunks = [[c.clone() for c in torch.tensor_split(t.flatten(), n)] for t in tensors]
    sources = [[frozenset([r]) for _ in range(n)] for r in range(n)]
    states = [RingState("start", 0, [[c.clone() for c in row] for row in chunks],
                        [list(row) for row in sources], [])]
    for phase, first in (("reduce-scatter", 0), ("all-gather", 1)):
        for s in range(n - 1):
            sends = [(r, (r + 1) % n, (r + first - s) % n) for r in range(n)]
            payload = [(chunks[src][c].clone(), sources[src][c]) for src, _, c in sends]
            for (_, dst, c), (data, who) in zip(sends, payload, strict=True):
                if phase == "reduce-scatter":
                    chunks[dst][c] += data
                    sources[dst][c] = sources[dst][c] | who
                else:
                    chunks[dst][c] = data
                    sources[dst][c] = who
            states.append(RingState(phase, s + 1, [[c.clone() for c in row] for row in chunks],
                                    [list(row) for row in sources], sends))
    return states


def _values(chunk) -> str:
    return " ".join(f"{v:g}" for v in chunk.tolist())


def _who(sources: frozenset[int], n: int) -> str:
    return "all" if len(sources) == n else "+".join(f"r{r}" for r in sorted(sources))


def format_ring(states: list[RingState]) -> str:
    """Every step as plain text: per rank, each chunk's values and the ranks it already sums."""
    n = len(states[0].chunks)
    lines = []
    for state in states:
        moved = ", ".join(f"r{a}→r{b}: chunk {c}" for a, b, c in state.transfers)
        lines.append(f"{state.title}" + (f"   ({moved})" if moved else ""))
        for r in range(n):
            cells = " | ".join(f"c{c} [{_values(state.chunks[r][c])}] {_who(state.sources[r][c], n)}"
                               for c in range(n))
            lines.append(f"  rank {r}: {cells}")
    return "\n".join(lines)


def ring_html(states: list[RingState], step: int) -> str:
    """One step of the ring as an HTML table (rows = ranks, columns = chunks)."""
    state = states[step]
    n = len(state.chunks)
    received = {(dst, c) for _, dst, c in state.transfers}
    head = "".join(f'<th style="{_CELL};{_HEAD}">chunk {c}</th>' for c in range(n))
    rows = []
    for r in range(n):
        cells = []
        for c in range(n):
            style = _CELL + (";" + _DONE if len(state.sources[r][c]) == n else "")
            style += ";" + _NEW if (r, c) in received else ""
            cells.append(f'<td class="ddp-chunk" data-sources="{len(state.sources[r][c])}" style="{style}">'
                         f'{_values(state.chunks[r][c])}<br><small>{_who(state.sources[r][c], n)}</small></td>')
        rows.append(f'<tr class="ddp-rank" data-rank="{r}"><th style="{_CELL};{_HEAD}">rank {r}</th>'
                    f'{"".join(cells)}</tr>')
    moved = "; ".join(f"rank {a} → rank {b}: chunk {c}" for a, b, c in state.transfers) or "nothing sent yet"
    total = states[-1].tensors()[0]
    return (f'<div class="ddp-ring" data-world-size="{n}" data-step="{step}">'
            f'<div style="font-size:13px"><b>{html.escape(state.title)}</b> (step {step} of {len(states) - 1}) '
            f'— sent in this step: {moved}</div>'
            f'<table style="{_TABLE}"><tr><th style="{_CELL};{_HEAD}"></th>{head}</tr>{"".join(rows)}</table>'
            f'<div style="font-size:13px"><span style="{_DONE};padding:0 4px">green</span>: complete sum of all '
            f'{n} ranks; <span style="{_NEW};padding:0 4px">blue frame</span>: received in this step; '
            f'small print: whose inputs the chunk sums. The element-wise sum is [{_values(total)}].</div></div>')


def ring_figure(states: list[RingState], columns: int = 4):
    """A matplotlib figure, one panel per step: rank × chunk, shaded by how many ranks it sums."""
    import matplotlib.pyplot as plt

    n = len(states[0].chunks)
    rows = -(-len(states) // columns)
    cols = min(columns, len(states))
    fig, axes = plt.subplots(rows, cols, figsize=(2.5 * cols, (0.5 * n + 0.8) * rows), squeeze=False)
    for ax in axes.flat[len(states):]:
        ax.axis("off")
    for ax, state in zip(axes.flat, states, strict=False):
        counts = [[len(state.sources[r][c]) for c in range(n)] for r in range(n)]
        ax.imshow(counts, cmap="Greens", vmin=0, vmax=n * 1.4, aspect="auto")
        for r in range(n):
            for c in range(n):
                who = state.sources[r][c]
                label = "all" if len(who) == n else "+".join(map(str, sorted(who)))
                ax.text(c, r, label, ha="center", va="center", fontsize=7,
                        color="white" if len(who) == n and n > 1 else "black")
        for _, dst, c in state.transfers:
            ax.add_patch(plt.Rectangle((c - 0.5, dst - 0.5), 1, 1, fill=False, edgecolor="#1c7ed6", lw=2))
        ax.set_title(state.title if state.phase != "start" else "start", fontsize=8)
        ax.set_xticks(range(n), [f"c{c}" for c in range(n)], fontsize=7)
        ax.set_yticks(range(n), [f"rank {r}" for r in range(n)], fontsize=7)
    fig.suptitle(f"Ring all-reduce, {n} ranks: whose inputs each rank's copy of each chunk sums "
                 "(blue frame: just received)", fontsize=9)
    fig.tight_layout()
    return fig


def ring_explorer(world_size: int = 2, step: int | None = None, length: int | None = None, seed: int = 0,
                  max_world_size: int = 6):
    """A world-size slider and a step slider above the ring's state at that step.

    The default step is the end of the reduce-scatter, where each rank holds one complete chunk.
    """
    import ipywidgets as w

    style = {"description_width": "7rem"}
    size = w.IntSlider(world_size, min=1, max=max(max_world_size, world_size), description="world size",
                       style=style)
    last = 2 * (world_size - 1)
    stepper = w.IntSlider(world_size - 1 if step is None else step, min=0, max=last, description="step", style=style)
    table = w.HTML()
    cache: dict[int, list[RingState]] = {}

    def states_for(n: int) -> list[RingState]:
        if n not in cache:
            cache[n] = ring_allreduce(rank_tensors(n, length if length and length >= n else None, seed))
        return cache[n]

    def update(_change=None):
        table.value = ring_html(states_for(size.value), min(stepper.value, 2 * (size.value - 1)))

    def resize(change):
        stepper.max = 2 * (change["new"] - 1)  # clamps the value, which calls update() if it changed
        update()

    size.observe(resize, names="value")
    stepper.observe(update, names="value")
    update()
    return w.VBox([size, stepper, table])


# ---------------------------------------------------------------------------------------------
# 3. torchrun: the command for each machine and the environment of each worker
# ---------------------------------------------------------------------------------------------

@dataclass
class Worker:
    """The variables torchrun sets for one worker process."""

    machine: int  # which machine (0-based, in the order they are listed)
    GROUP_RANK: int
    LOCAL_RANK: int
    RANK: int
    WORLD_SIZE: int
    LOCAL_WORLD_SIZE: int

    def env(self) -> dict[str, str]:
        return {k: str(getattr(self, k)) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK",
                                                      "LOCAL_WORLD_SIZE")}


@dataclass
class Plan:
    """One command per machine and the workers they start.

    With ``rdzv_backend="static"`` machine k passes ``--node-rank=k`` and its GROUP_RANK is k.
    With ``"c10d"`` every machine runs the same command and the rendezvous numbers the machines
    0 … nnodes-1 in an order of its choosing (``workers`` shows machine k getting group rank k;
    what holds in every case is RANK = GROUP_RANK · nproc_per_node + LOCAL_RANK).
    """

    nnodes: int
    nproc_per_node: int
    rdzv_backend: str
    commands: list[str]
    workers: list[Worker]

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node


def torchrun_plan(nnodes: int, nproc_per_node: int, rdzv_host: str = "10.0.0.1", rdzv_port: int = 29400,
                  script: str = "train.py", script_args: str = "", rdzv_backend: str = "c10d",
                  rdzv_id: str = "ddp_job") -> Plan:
    """The exact torchrun command for each machine, and the environment each worker will see."""
    _require(nnodes >= 1, f"nnodes must be >= 1, got {nnodes}")
    _require(nproc_per_node >= 1, f"nproc_per_node must be >= 1, got {nproc_per_node}")
    _require(1 <= rdzv_port <= 65535, f"rdzv_port must be in 1..65535, got {rdzv_port}")
    _require(bool(rdzv_host.strip()), "rdzv_host must not be empty")
    _require(rdzv_backend in ("c10d", "static"), f"rdzv_backend must be 'c10d' or 'static', got {rdzv_backend!r}")
    tail = " ".join([shlex.quote(script), *([script_args] if script_args else [])])
    host = shlex.quote(rdzv_host)
    commands = []
    for node in range(nnodes):
        if rdzv_backend == "c10d":
            how = f"--rdzv-backend=c10d --rdzv-endpoint={host}:{rdzv_port} --rdzv-id={shlex.quote(rdzv_id)}"
        else:
            how = f"--master-addr={host} --master-port={rdzv_port} --node-rank={node}"
        commands.append(f"torchrun --nnodes={nnodes} --nproc_per_node={nproc_per_node} {how} {tail}")
    world = nnodes * nproc_per_node
    workers = [Worker(node, node, local, node * nproc_per_node + local, world, nproc_per_node)
               for node in range(nnodes) for local in range(nproc_per_node)]
    return Plan(nnodes, nproc_per_node, rdzv_backend, commands, workers)


def format_plan(plan: Plan) -> str:
    """The commands and a plain table of every worker's variables."""
    lines = []
    for node, command in enumerate(plan.commands):
        lines.append(f"machine {node}: {command}")
    if plan.rdzv_backend == "c10d" and plan.nnodes > 1:
        lines.append("(c10d: the same command everywhere; the rendezvous decides which machine gets which "
                     "GROUP_RANK — shown here in machine order)")
    lines.append(f"{'machine':>8} {'GROUP_RANK':>10} {'LOCAL_RANK':>10} {'RANK':>5} {'WORLD_SIZE':>10}")
    for wk in plan.workers:
        lines.append(f"{wk.machine:>8} {wk.GROUP_RANK:>10} {wk.LOCAL_RANK:>10} {wk.RANK:>5} {wk.WORLD_SIZE:>10}")
    return "\n".join(lines)


def plan_html(plan: Plan, node_rank: int = 0) -> str:
    """The command for machine `node_rank`, all commands, and the workers' table with that machine highlighted."""
    node_rank = min(node_rank, plan.nnodes - 1)
    same = plan.rdzv_backend == "c10d"
    others = "".join(f'<li><code>{html.escape(c)}</code></li>' for c in plan.commands)
    keys = ("GROUP_RANK", "LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
    head = "".join(f'<th style="{_CELL};{_HEAD}">{k}</th>' for k in ("machine", *keys))
    rows = []
    for wk in plan.workers:
        mark = ";" + _DONE if wk.machine == node_rank else ""
        cells = "".join(f'<td style="{_CELL}{mark}">{v}</td>' for v in (wk.machine, *(getattr(wk, k) for k in keys)))
        rows.append(f'<tr class="ddp-worker" data-machine="{wk.machine}" data-rank="{wk.RANK}">{cells}</tr>')
    note = ("c10d rendezvous: every machine runs the same command; the rendezvous numbers the machines "
            "(GROUP_RANK), here shown in machine order." if same else
            "static rendezvous: machine k passes --node-rank=k and becomes GROUP_RANK k.")
    return (f'<div class="ddp-torchrun" data-world-size="{plan.world_size}" data-node-rank="{node_rank}">'
            f'<div style="font-size:13px">On machine {node_rank} run:</div>'
            f'<pre class="ddp-command" style="background:#f8f9fa;color:#222;padding:6px;margin:4px 0;'
            f'white-space:pre-wrap">{html.escape(plan.commands[node_rank])}</pre>'
            f'<div style="font-size:13px">{note} All {plan.nnodes} command(s):</div>'
            f'<ol start="0" style="font-size:12px">{others}</ol>'
            f'<table style="{_TABLE}"><tr>{head}</tr>{"".join(rows)}</table></div>')


def torchrun_explorer(nnodes: int = 2, nproc_per_node: int = 2, node_rank: int = 0, rdzv_host: str = "10.0.0.1",
                      rdzv_port: int = 29400, script: str = "train.py", script_args: str = "",
                      rdzv_backend: str = "c10d", rdzv_id: str = "ddp_job", max_nnodes: int = 8,
                      max_nproc_per_node: int = 8):
    """Controls for the machines and processes above the commands and the workers' variables."""
    import ipywidgets as w

    style = {"description_width": "8rem"}
    nodes = w.IntSlider(nnodes, min=1, max=max(max_nnodes, nnodes), description="machines (nnodes)", style=style)
    procs = w.IntSlider(nproc_per_node, min=1, max=max(max_nproc_per_node, nproc_per_node),
                        description="nproc_per_node", style=style)
    node = w.IntSlider(min(node_rank, nnodes - 1), min=0, max=nnodes - 1, description="this machine", style=style)
    host = w.Text(rdzv_host, description="rendezvous host", style=style)
    port = w.BoundedIntText(rdzv_port, min=1, max=65535, description="rendezvous port", style=style)
    backend = w.Dropdown(options=["c10d", "static"], value=rdzv_backend, description="rendezvous", style=style)
    table = w.HTML()

    def update(_change=None):
        node.max = nodes.value - 1
        try:
            plan = torchrun_plan(nodes.value, procs.value, host.value, port.value, script, script_args,
                                 backend.value, rdzv_id)
        except ValueError as error:
            table.value = f'<div style="color:#b00">{html.escape(str(error))}</div>'
            return
        table.value = plan_html(plan, node.value)

    for control in (nodes, procs, node, host, port, backend):
        control.observe(update, names="value")
    update()
    return w.VBox([nodes, procs, node, host, port, backend, table])
