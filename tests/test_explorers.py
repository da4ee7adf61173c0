"""notebooks/explorers.py: the plain functions behind the lessons' widgets, and the widgets' wiring."""

import itertools
import json
import math
import re
import shlex
import socket
import subprocess
import sys
from collections import Counter

import matplotlib
import pytest
import torch
from conftest import BIN, NOTEBOOKS, env_with_bin

matplotlib.use("Agg")
sys.path.insert(0, str(NOTEBOOKS))
import explorers as ex  # noqa: E402

# --- DistributedSampler shards ---------------------------------------------------------------

def documented_shards(dataset_size, world_size, shuffle, seed, epoch, drop_last):
    """DistributedSampler's rule as its docstring states it, written from scratch (no sampler involved): the
    order is range(size), or torch.randperm(size) seeded with seed + epoch; every rank gets ceil(size / N)
    indices, the list padded by repeating it from its start (drop_last: floor(size / N), the tail dropped);
    rank r takes every N-th index from position r."""
    order = list(range(dataset_size))
    if shuffle:
        order = torch.randperm(dataset_size, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    per_rank = dataset_size // world_size if drop_last else math.ceil(dataset_size / world_size)
    total = per_rank * world_size
    laid_out = (order * math.ceil(total / dataset_size))[:total]
    return [laid_out[rank::world_size] for rank in range(world_size)]


@pytest.mark.parametrize("dataset_size,world_size", [(1, 1), (1, 3), (2, 5), (7, 2), (10, 3), (12, 4), (13, 5)])
@pytest.mark.parametrize("shuffle,drop_last,epoch", list(itertools.product([True, False], [False, True], [0, 1])))
def test_shards_match_distributed_sampler(dataset_size, world_size, shuffle, drop_last, epoch):
    shards = ex.sampler_shards(dataset_size, world_size, shuffle=shuffle, seed=3, epoch=epoch, drop_last=drop_last)
    assert shards.indices == documented_shards(dataset_size, world_size, shuffle, 3, epoch, drop_last)
    per_rank = dataset_size // world_size if drop_last else math.ceil(dataset_size / world_size)
    assert shards.total_size == per_rank * world_size  # the padding rule: ceil(size / N) * N indices in all
    for rank in range(world_size):
        assert len(shards.indices[rank]) == len(shards.padding[rank]) == per_rank, rank
    everything = [i for rank in shards.indices for i in rank]
    real = [i for rank, pads in zip(shards.indices, shards.padding, strict=True)
            for i, pad in zip(rank, pads, strict=True) if not pad]
    padded = [i for rank, pads in zip(shards.indices, shards.padding, strict=True)
              for i, pad in zip(rank, pads, strict=True) if pad]
    assert len(set(real)) == len(real), "a sample not marked as padding appears twice"
    assert shards.num_padding == len(padded) == len(everything) - len(real)
    if drop_last:
        assert not padded and sorted(real + shards.dropped) == list(range(dataset_size))
        assert len(shards.dropped) == dataset_size % world_size
    else:
        assert sorted(real) == list(range(dataset_size)) and not shards.dropped
        assert len(padded) == -dataset_size % world_size
        assert set(padded) <= set(real)
    assert len({len(rank) for rank in shards.indices}) == 1, "every rank gets the same number of indices"


@pytest.mark.parametrize("drop_last,expected,dropped", [
    (False, [[0, 2, 4, 6], [1, 3, 5, 0]], []),  # 7 samples, 2 ranks: 8 indices, sample 0 twice
    (True, [[0, 2, 4], [1, 3, 5]], [6]),  # drop_last: 6 indices, sample 6 never seen
])
def test_shards_by_hand(drop_last, expected, dropped):
    shards = ex.sampler_shards(7, 2, shuffle=False, drop_last=drop_last)
    assert shards.indices == expected and shards.dropped == dropped
    assert shards.num_padding == (0 if drop_last else 1)


def test_padding_example_from_facts():
    """10 samples on 3 ranks: 12 indices; in order, 0 and 1 are the repeated ones."""
    shards = ex.sampler_shards(10, 3, shuffle=False)
    assert shards.total_size == 12 and shards.num_padding == 2
    assert shards.indices == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    assert shards.padding == [[False] * 4, [False, False, False, True], [False, False, False, True]]
    text = ex.format_shards(shards)
    assert "0*" in text and "1*" in text and "2 duplicate(s)" in text
    assert ex.shards_html(shards).count("ddp-padding") == 2


def test_set_epoch_changes_the_order_only_with_shuffle():
    assert ex.sampler_shards(20, 2, epoch=0).indices != ex.sampler_shards(20, 2, epoch=1).indices
    assert ex.sampler_shards(20, 2, shuffle=False, epoch=0).indices == \
        ex.sampler_shards(20, 2, shuffle=False, epoch=1).indices


@pytest.mark.parametrize("bad", [dict(dataset_size=0, world_size=2), dict(dataset_size=4, world_size=0),
                                 dict(dataset_size=4, world_size=2, epoch=-1)])
def test_shards_reject_bad_values(bad):
    with pytest.raises(ValueError):
        ex.sampler_shards(**bad)


# --- ring all-reduce ---------------------------------------------------------------------------

@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("length", [None, 7, 11])
def test_ring_final_state_is_the_elementwise_sum(world_size, length):
    if length is not None and length < world_size:
        pytest.skip("fewer elements than ranks")
    tensors = ex.rank_tensors(world_size, length, seed=world_size)
    states = ex.ring_allreduce(tensors)
    total = torch.stack(tensors).sum(dim=0)
    assert len(states) == 2 * (world_size - 1) + 1
    for rank_tensor in states[-1].tensors():
        assert torch.equal(rank_tensor, total)
    originals = [torch.tensor_split(t, world_size) for t in tensors]
    for k, state in enumerate(states):
        # every chunk always equals the sum of the original chunks of the ranks it claims to hold
        for r, c in itertools.product(range(world_size), repeat=2):
            expected = sum(originals[s][c] for s in state.sources[r][c])
            assert torch.equal(state.chunks[r][c], expected), (k, r, c)
        if k:  # each rank sends exactly one chunk to its right neighbour and receives one
            assert sorted(src for src, _, _ in state.transfers) == list(range(world_size))
            assert all(dst == (src + 1) % world_size for src, dst, _ in state.transfers)
    middle = states[world_size - 1]  # end of the reduce-scatter: rank r owns the full chunk r + 1
    for r in range(world_size):
        assert len(middle.sources[r][(r + 1) % world_size]) == world_size


def test_ring_rejects_mismatched_tensors():
    with pytest.raises(ValueError):
        ex.ring_allreduce([torch.zeros(4), torch.zeros(5)])
    with pytest.raises(ValueError):
        ex.ring_allreduce([torch.zeros(2)] * 3)


def test_ring_views():
    states = ex.ring_allreduce(ex.rank_tensors(3))
    text = ex.format_ring(states)
    assert text.count("reduce-scatter step") == 2 and text.count("all-gather step") == 2
    page = ex.ring_html(states, 2)
    assert 'data-step="2"' in page and page.count('class="ddp-rank"') == 3
    fig = ex.ring_figure(states)
    assert len([a for a in fig.axes if a.has_data()]) == len(states)


# --- torchrun command builder ------------------------------------------------------------------

# (machine, GROUP_RANK, LOCAL_RANK, RANK) of every worker, written out by hand: the numbers torchrun gives
# (test_plan_matches_real_torchrun below checks the 2 x 2 case against a real launch)
BY_HAND = {
    (1, 1): [(0, 0, 0, 0)],
    (1, 4): [(0, 0, 0, 0), (0, 0, 1, 1), (0, 0, 2, 2), (0, 0, 3, 3)],
    (2, 2): [(0, 0, 0, 0), (0, 0, 1, 1), (1, 1, 0, 2), (1, 1, 1, 3)],
    (3, 2): [(0, 0, 0, 0), (0, 0, 1, 1), (1, 1, 0, 2), (1, 1, 1, 3), (2, 2, 0, 4), (2, 2, 1, 5)],
    (2, 3): [(0, 0, 0, 0), (0, 0, 1, 1), (0, 0, 2, 2), (1, 1, 0, 3), (1, 1, 1, 4), (1, 1, 2, 5)],
}


@pytest.mark.parametrize("nnodes,nproc", sorted(BY_HAND))
@pytest.mark.parametrize("backend", ["c10d", "static"])
def test_plan_environment(nnodes, nproc, backend):
    plan = ex.torchrun_plan(nnodes, nproc, "10.1.2.3", 29411, "train.py", "--epochs 3", rdzv_backend=backend)
    assert len(plan.commands) == nnodes and plan.world_size == len(BY_HAND[nnodes, nproc])
    assert [(w.machine, w.GROUP_RANK, w.LOCAL_RANK, w.RANK) for w in plan.workers] == BY_HAND[nnodes, nproc]
    for w in plan.workers:
        assert w.WORLD_SIZE == len(BY_HAND[nnodes, nproc]) and w.LOCAL_WORLD_SIZE == nproc
        assert w.env()["RANK"] == str(w.RANK) and w.env()["LOCAL_RANK"] == str(w.LOCAL_RANK)
    for node, command in enumerate(plan.commands):
        assert command.startswith(f"torchrun --nnodes={nnodes} --nproc_per_node={nproc} ")
        assert command.endswith(" train.py --epochs 3")
        if backend == "static":
            assert f"--master-addr=10.1.2.3 --master-port=29411 --node-rank={node}" in command
        else:
            assert "--rdzv-backend=c10d --rdzv-endpoint=10.1.2.3:29411" in command and command == plan.commands[0]
    assert "GROUP_RANK" in ex.format_plan(plan) and "ddp-worker" in ex.plan_html(plan, nnodes - 1)


@pytest.mark.parametrize("bad", [dict(nnodes=0, nproc_per_node=1), dict(nnodes=1, nproc_per_node=0),
                                 dict(nnodes=1, nproc_per_node=1, rdzv_port=70000),
                                 dict(nnodes=1, nproc_per_node=1, rdzv_backend="etcd")])
def test_plan_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        ex.torchrun_plan(**bad)


PRINT_ENV = """import json, os
keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE")
print("ENV " + json.dumps({k: os.environ[k] for k in keys}), flush=True)
"""


@pytest.mark.parametrize("backend", ["static", "c10d"])
def test_plan_matches_real_torchrun(tmp_path, backend):
    """Two torchrun agents on 127.0.0.1 run the builder's exact commands; workers report their env."""
    script = tmp_path / "print_env.py"
    script.write_text(PRINT_ENV)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    plan = ex.torchrun_plan(2, 2, "127.0.0.1", port, str(script), rdzv_backend=backend, rdzv_id="test")
    agents = []
    for command in plan.commands:
        argv = shlex.split(command)
        agents.append(subprocess.Popen([str(BIN / argv[0]), *argv[1:]], cwd=tmp_path, env=env_with_bin(),
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for agent in agents:
            out, _ = agent.communicate(timeout=180)
            outputs.append(out)
            assert agent.returncode == 0, out[-2000:]
    finally:
        for agent in agents:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
    # Workers share their agent's stdout, so two reports can land on one line: match each one.
    seen = [[json.loads(report) for report in re.findall(r"ENV (\{[^}]*\})", out)] for out in outputs]
    if backend == "static":  # machine k is GROUP_RANK k: exact, machine by machine
        for machine, envs in enumerate(seen):
            assert sorted(envs, key=lambda e: int(e["RANK"])) == \
                [w.env() for w in plan.workers if w.machine == machine]
    else:  # c10d numbers the machines itself: the same set of workers, each machine one group
        def as_set(envs):
            return Counter(json.dumps(e, sort_keys=True) for e in envs)

        assert as_set(e for envs in seen for e in envs) == as_set(w.env() for w in plan.workers)
        assert all(len({e["GROUP_RANK"] for e in envs}) == 1 for envs in seen)


# --- widgets -----------------------------------------------------------------------------------

def test_sampler_widget_follows_its_controls():
    box = ex.sampler_explorer(dataset_size=10, world_size=3)
    table = box.children[-1]
    assert 'data-world-size="3"' in table.value and table.value.count('class="ddp-rank"') == 3
    world = next(c for c in box.children if getattr(c, "description", "") == "world size")
    world.value = 4
    assert 'data-world-size="4"' in table.value and table.value == ex.shards_html(ex.sampler_shards(10, 4))


def test_ring_widget_follows_its_controls():
    box = ex.ring_explorer(world_size=3)
    size, step, table = box.children
    assert step.value == 2 and step.max == 4 and 'data-step="2"' in table.value
    size.value = 2
    assert step.max == 2 and 'data-world-size="2"' in table.value
    step.value = 0
    assert 'data-step="0"' in table.value


def test_torchrun_widget_follows_its_controls():
    box = ex.torchrun_explorer(nnodes=2, nproc_per_node=2, rdzv_host="127.0.0.1", rdzv_port=29400)
    nodes, procs, node, *_, table = box.children
    assert 'data-world-size="4"' in table.value
    nodes.value, procs.value = 3, 4
    node.value = 2
    assert node.max == 2 and 'data-world-size="12"' in table.value and 'data-node-rank="2"' in table.value


# --- the lessons that show them ----------------------------------------------------------------

@pytest.mark.parametrize("prefix,explorer", [("05_", "sampler_explorer"), ("07_", "ring_explorer"),
                                             ("10_", "torchrun_explorer")])
def test_lessons_show_their_explorer(prefix, explorer):
    lessons = sorted(p for p in NOTEBOOKS.glob(f"{prefix}*.ipynb") if ".zh-" not in p.name)
    assert lessons, f"no lesson {prefix}*.ipynb"
    cells = json.loads(lessons[0].read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert any(f"{explorer}(" in source for source in code), f"{lessons[0].name} does not show {explorer}"
    headings = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    assert any("## Explore:" in text for text in headings), f"{lessons[0].name} has no 'Explore' section"
