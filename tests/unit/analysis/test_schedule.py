"""farm.analysis.schedule, driven by a small event simulation of a cluster: trials take their
estimated seconds, plus the cold start's extra where the node's compile cache does not yet hold
their group (written when the first start of the group there is over, as an engine writes it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from farm.analysis.schedule import Dispatcher, Item, item_of, items_of, order
from farm.engines import get_engine
from farm.study.grid import MeasuredDurations, trial_starts
from farm.study.trial import Trial

COLD, WARM = 24.0, 10.0


@dataclass
class Ran:
    item: Item
    node: str
    start: float
    end: float
    cold: bool


@dataclass
class Sim:
    nodes: dict[str, int]
    ran: list[Ran] = field(default_factory=list)
    cache: dict[tuple[str, str | None], float] = field(default_factory=dict)  # written at

    def run(self, dispatcher: Dispatcher) -> float:
        now, running = 0.0, []
        while dispatcher.pending or running:
            free = dict(self.nodes)
            for r in running:
                free[r.node] -= r.item.gpus
            while (picked := dispatcher.next(free, now)) is not None:
                item, node = picked
                assert item.gpus <= free[node], "overbooked"
                free[node] -= item.gpus
                dispatcher.started(item, node, now)
                written = self.cache.get((node, item.group))
                cold = written is None or written > now
                end = now + item.seconds + (item.cold_extra_s if cold else 0.0)
                if written is None:
                    self.cache[(node, item.group)] = now + (item.cold_start_s if cold else item.warm_start_s)
                r = Ran(item, node, now, end, cold)
                running.append(r)
                self.ran.append(r)
            later = [w for w in self.cache.values() if w > now]
            assert running or later, "pending trials but nothing running, nothing picked, no cache to wait for"
            now = min([r.end for r in running] + later)
            running = [r for r in running if r.end > now]
        return max(r.end for r in self.ran)


def items(groups: list[tuple[int, int]], seconds: float = 60.0) -> list[Item]:
    """(trials, gpus) per group."""
    return [Item(id=f"g{g}-t{t}", gpus=gpus, seconds=seconds * (1 + t % 3 / 10), cold_start_s=COLD,
                 warm_start_s=WARM, group=f"g{g}")
            for g, (n, gpus) in enumerate(groups) for t in range(n)]


def test_a_group_runs_on_one_node_and_starts_cold_once():
    sim = Sim({"a": 2, "b": 2})
    sim.run(Dispatcher(items([(6, 1), (6, 1), (6, 1), (6, 1)])))
    for g in range(4):
        runs = [r for r in sim.ran if r.item.group == f"g{g}"]
        assert len({r.node for r in runs}) == 1, [(r.item.id, r.node) for r in runs]
        assert sum(r.cold for r in runs) == 1
        first = min(runs, key=lambda r: r.start)
        assert all(r.start >= first.start + COLD for r in runs if r is not first), "after the cache was written"


def test_a_second_trial_of_a_group_waits_for_the_cache_only_when_that_is_cheaper_than_compiling():
    # the H200's vLLM: 241 s cold, 103 s warm; the first trial of the group started at 0 on node a
    work = [Item(id=f"t{i}", gpus=1, seconds=400, cold_start_s=241, warm_start_s=103, group="g") for i in range(2)]
    d = Dispatcher(list(work))
    first, node = d.next({"a": 2}, 0.0)
    d.started(first, node, 0.0)
    assert d.pick("a", 1, 150.0, {}) is None  # its cache is written in 91 s: less than 138 s more of compiling
    assert d.pick("a", 1, 50.0, {}) is not None  # 191 s of idle GPU would cost more than compiling again
    assert d.pick("a", 1, 241.0, {}).id == "t1"  # warm now


def test_larger_trials_start_first_while_whole_nodes_are_free():
    plan = order(items([(4, 1), (2, 2)]))
    assert [i.gpus for i in plan] == [2, 2, 1, 1, 1, 1]
    sim = Sim({"a": 4, "b": 4})
    sim.run(Dispatcher(items([(10, 1), (3, 2)])))
    assert all(r.start == 0.0 for r in sim.ran if r.item.gpus == 2)


def test_full_grid_shape_is_packed_within_ten_percent_of_the_ideal():
    # The `full` grid's shape on 2 nodes x 8 GPUs: compile groups of 2 and of 12 TP1 trials, and TP2 groups.
    work = items([(2, 1)] * 24 + [(12, 1)] * 18 + [(4, 2)] * 4, seconds=300.0)
    sim = Sim({"a": 8, "b": 8})
    makespan = sim.run(Dispatcher(work))
    gpu_s = sum((r.end - r.start) * r.item.gpus for r in sim.ran)
    ideal = max(max(r.end - r.start for r in sim.ran), gpu_s / 16)
    assert ideal / makespan >= 0.9, (ideal, makespan)
    groups = {i.group for i in work}
    assert sum(r.cold for r in sim.ran) <= len(groups) + 16  # a group is stolen cold only at the tail


def test_a_retry_goes_to_another_node_where_one_has_room():
    d = Dispatcher([Item(id="x", gpus=1, seconds=10, group="g", avoid=frozenset({"a"}))])
    assert d.next({"a": 8, "b": 1}, 0.0)[1] == "b"
    d = Dispatcher([Item(id="x", gpus=2, seconds=10, group="g", avoid=frozenset({"a"}))])
    assert d.next({"a": 8, "b": 1}, 0.0)[1] == "a"  # nowhere else fits: the same node rather than none


@st.composite
def workloads(draw):
    n_nodes = draw(st.integers(1, 3))
    nodes = {f"n{i}": draw(st.sampled_from([2, 4, 8])) for i in range(n_nodes)}
    work = []
    for g in range(draw(st.integers(1, 8))):
        gpus = draw(st.sampled_from([1, 1, 1, 2]))
        for t in range(draw(st.integers(1, 6))):
            allowed = draw(st.one_of(st.none(), st.sets(st.sampled_from(sorted(nodes)), min_size=1)))
            if allowed is not None and all(nodes[n] < gpus for n in allowed):
                allowed = None
            # a trial's wall time holds its engine start
            work.append(Item(id=f"g{g}-{t}", gpus=gpus, seconds=WARM + draw(st.floats(5, 100)),
                             cold_start_s=COLD, warm_start_s=WARM, group=f"g{g}",
                             nodes=frozenset(allowed) if allowed else None))
    return nodes, work


@settings(derandomize=True, database=None, deadline=None, max_examples=150)
@given(workloads())
def test_every_trial_runs_once_where_it_may_and_no_gpu_idles_for_long(case):
    nodes, work = case
    sim = Sim(nodes)
    makespan = sim.run(Dispatcher(list(work)))
    assert sorted(r.item.id for r in sim.ran) == sorted(i.id for i in work)
    assert all(r.item.nodes is None or r.node in r.item.nodes for r in sim.ran)
    # Greedy list scheduling: the work spread over the GPUs a trial can always use, plus the
    # longest trial and a compile-cache wait, bounds it.
    usable = sum(max(n - 1, 1) for n in nodes.values())
    longest = max(i.seconds + i.cold_extra_s for i in work)
    pinned = max(sum(i.gpu_seconds + i.gpus * i.cold_extra_s for i in work if i.nodes == frozenset({n})) / nodes[n]
                 for n in nodes)
    bound = sum(i.gpu_seconds + i.gpus * i.cold_extra_s for i in work) / usable + pinned + longest + COLD
    assert makespan <= bound


def test_compile_keys_group_what_shares_a_compiled_graph():
    def key(engine: str, **flags):
        t = Trial(id="x", engine=engine, model_key="m", model="m", flags=flags, profiles=["p"], gpus=1)
        return item_of(t, 1.0, 2.0, 1.0).group

    vllm = "vllm"
    base = {"quantization": "fp8", "enable-prefix-caching": True}
    assert key(vllm, **base) == key(vllm, **{**base, "max-num-seqs": 256, "gpu-memory-utilization": 0.95})
    # prefix caching on a hybrid model changes the graph: step1 after step2 compiled cold on the H200
    assert key(vllm, **base) != key(vllm, **{**base, "enable-prefix-caching": False})
    # each batch budget compiles cold (bench/h200/README.md), so does another dtype
    assert key(vllm, **base) != key(vllm, **{**base, "max-num-batched-tokens": 16384})
    assert key(vllm, **base) != key(vllm, **{**base, "kv-cache-dtype": "fp8"})
    assert key(vllm, **base) != key("sglang", **base)
    assert get_engine("mock").compile_key("m", {"graph": "a", "ttft-ms": 5}) == \
        get_engine("mock").compile_key("m", {"graph": "a", "ttft-ms": 9})


# -- estimates measured by the study's earlier sweep (farm/analysis/durations.py) ----------------

def _vllm(id: str, profiles: list[str], **flags) -> Trial:
    return Trial(id=id, engine="vllm", model_key="m", model="m", flags=flags, profiles=profiles, gpus=1)


def _measured(**fields) -> MeasuredDurations:
    return MeasuredDurations(**{"source": "earlier", "runs": 8, "start_s": {}, "profile_s": {}, **fields})


def test_a_profile_the_earlier_sweep_measured_slow_moves_its_trial_first(study):
    # Different graphs (quantization), one GPU: whichever trial the scheduler thinks longest starts first.
    chat, batch = _vllm("chat", ["sharegpt"]), _vllm("batch", ["throughput"], quantization="fp8")

    def first(measured):
        items = items_of(study, [chat, batch], measured)
        return Dispatcher(list(items.values())).next({"a": 1}, 0.0)[0].id

    assert first(None) == "chat"  # the seed's sharegpt run (125 s) is its longest
    assert first(_measured(profile_s={"throughput": 400.0})) == "batch"  # this cluster's throughput runs take 400 s


def test_a_small_measured_cold_warm_gap_makes_a_second_trial_compile_rather_than_wait(study):
    # One compile group (the sequence limit compiles nothing new), a node with 2 GPUs, the first trial started at 0.
    one, two = _vllm("one", ["throughput"], **{"max-num-seqs": 128}), _vllm("two", ["throughput"], **{"max-num-seqs": 256})

    def second_at(now, measured):
        d = Dispatcher(list(items_of(study, [one, two], measured).values()))
        first, node = d.next({"a": 2}, 0.0)
        d.started(first, node, 0.0)
        return d.pick("a", 1, now, {})

    # defaults (240 s cold, 103 s warm): at 120 s the cache is 120 s away, less than 137 s more of compiling
    assert second_at(120.0, None) is None
    # measured 160 s cold, 150 s warm: waiting 40 s for the cache would save 10 s
    measured = _measured(start_s={"vllm": 155.0}, cold_start_s={"vllm": 160.0}, warm_start_s={"vllm": 150.0})
    assert second_at(120.0, measured) is not None


@pytest.mark.parametrize("engine, flags, measured, expected", [
    ("vllm", {}, None, (240.0, 103.0)),
    ("vllm", {}, dict(start_s={"vllm": 120.0}, cold_start_s={"vllm": 180.0}, warm_start_s={"vllm": 60.0}), (180.0, 60.0)),
    ("vllm", {}, dict(start_s={"vllm": 90.0}, warm_start_s={"vllm": 90.0}), (240.0, 90.0)),  # no cold start seen
    ("vllm", {}, dict(start_s={"vllm": 300.0}, cold_start_s={"vllm": 300.0}), (300.0, 103.0)),  # no warm start seen
    # starts whose cache state went unrecorded: no gap to learn, so none is invented ...
    ("vllm", {}, dict(start_s={"vllm": 150.0}), (240.0, 103.0)),
    # ... but they are the start of an engine that keeps no compile cache
    ("mock", {}, dict(start_s={"mock": 4.0}), (4.0, 4.0)),
    ("sglang", {}, dict(start_s={"vllm": 150.0}, cold_start_s={"vllm": 150.0}), (240.0, 80.0)),  # another engine's
])
def test_the_start_estimate_is_measured_where_that_kind_of_start_was_seen(engine, flags, measured, expected):
    trial = Trial(id="t", engine=engine, model_key="m", model="m", flags=flags, profiles=["p"], gpus=1)
    assert trial_starts(trial, _measured(**measured) if measured is not None else None) == expected
