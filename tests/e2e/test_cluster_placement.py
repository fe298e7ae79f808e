"""A simulated cluster on one machine (`ray.cluster_utils.Cluster`): a head with no GPU, two
worker nodes with 4 declared H200 GPUs each and one with 8 A100s, a mock sweep of 4 trials that
ask for 1 to 4 GPUs each (10 in all) of type H200, real engines, real guidellm, real MLflow (SQLite).

Checks, from what the trials recorded: both H200 nodes ran trials, the A100 node none; at no
moment did the trials on a node hold more GPUs than it has, and trials that overlapped in time on a node had disjoint GPUs;
each engine process saw exactly its trial's GPUs in CUDA_VISIBLE_DEVICES (the engine writes what
it saw into its own log); MLflow holds every trial once. During the sweep, the trials' actors
are seen by name through Ray's State API (and `farm status` counts them as running), and farm's
metrics are read from Ray's Prometheus export endpoint (each node's `metrics_export_port`).
"""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import httpx
import pytest
import yaml

from conftest import REPO
from raynodes import LOOPBACK_ENV, free_ports, set_env
from sweeptools import HANG_S, wait_until

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GPUS_PER_NODE = 4


def _engine_wrapper(tmp: Path) -> Path:
    """The mock engine behind a script that first writes the CUDA_VISIBLE_DEVICES it was given."""
    import farm.engines.mock as mock

    script = tmp / "mock-engine"
    script.write_text("#!/bin/sh\n"
                      'echo "farm-test engine CUDA_VISIBLE_DEVICES=[${CUDA_VISIBLE_DEVICES-unset}]"\n'
                      f'exec {mock._GUIDELLM} mock-server "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


class Observer(threading.Thread):
    """Polls the State API for alive actors and every node's metrics endpoint while the sweep runs."""

    def __init__(self, ports: list[int], uri: str, dashboard: str):
        super().__init__(daemon=True)
        self.ports = ports
        self.uri, self.dashboard = uri, dashboard
        self.sweep_id: str | None = None
        self.statuses: list[dict[str, int]] = []
        self.names: set[str] = set()
        self.found: dict[str, str] = {}  # trial id -> actor name, as `farm status` finds them in the sweep's namespace
        self.scrapes: list[str] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from ray.util.state import list_actors

        while not self.stop.is_set():
            try:
                self.names |= {a.name for a in list_actors(filters=[("state", "=", "ALIVE")]) if a.name}
            except Exception as exc:  # the State API may be briefly busy; keep the last error
                self.errors.append(f"state: {exc}")
            if self.sweep_id:
                from farm.run.sweep_status import running_trials, sweep_status

                try:
                    self.statuses.append(sweep_status(self.uri, self.sweep_id, address=self.dashboard).counts())
                    self.found.update(running_trials(self.dashboard, self.sweep_id))
                except Exception as exc:
                    self.errors.append(f"status: {exc}")
            for port in self.ports:
                try:
                    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
                    if "ray_farm_" in text:
                        self.scrapes.append(text)
                except httpx.HTTPError as exc:
                    self.errors.append(f"metrics {port}: {exc}")
            self.stop.wait(1.0)


@pytest.fixture(scope="module")
def cluster_sweep(tmp_path_factory):
    import ray
    from ray.cluster_utils import Cluster

    from farm.run import driver
    from farm.run.events import SweepEvents
    from farm.run.sweep_plan import SweepPlan
    from farm.study.grid import expand
    from farm.study.load import load_study

    tmp = tmp_path_factory.mktemp("cluster")
    data = yaml.safe_load((FIXTURES / "studies" / "cluster.yaml").read_text())
    data["engines"]["mock"]["launcher"] = [str(_engine_wrapper(tmp))]
    (tmp / "study.yaml").write_text(yaml.safe_dump(data))
    study = load_study(tmp / "study.yaml")
    trials = expand(study, "placement")

    restore_env = set_env(LOOPBACK_ENV)
    (dashboard_port,) = free_ports(1)
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "num_gpus": 0, "include_dashboard": True, "dashboard_port": dashboard_port,
        "_system_config": {"metrics_report_interval_ms": 1000}})
    workers = [cluster.add_node(num_cpus=4, num_gpus=GPUS_PER_NODE, resources={"accelerator_type:H200": 1})
               for _ in range(2)]
    other = cluster.add_node(num_cpus=4, num_gpus=2 * GPUS_PER_NODE, resources={"accelerator_type:A100": 1})
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        ports = [n["MetricsExportPort"] for n in ray.nodes() if n["Alive"]]
        uri = f"sqlite:///{tmp / 'mlflow.db'}"
        observer = Observer(ports, uri, f"http://127.0.0.1:{dashboard_port}")
        observer.start()
        class Observed(SweepEvents):
            def on_sweep(self, sweep_id: str) -> None:
                observer.sweep_id = sweep_id

        outcome = driver.run_sweep(SweepPlan(study=study, grid="placement", trials=trials, tracking_uri=uri,
                                             experiment=study.experiment_name, address=cluster.address, resume=None,
                                             repeats=1, workdir=tmp / "runs", command="test_cluster_placement"),
                                   Observed())
        observer.stop.set()
        observer.join(timeout=30)
        # The driver (this process) keeps its metrics: read them once more, once Ray's endpoint
        # has exported them after the last trial (none of the sweep's trials pending or running).
        from farm.run.metrics import parse_prometheus

        def after_the_last_trial() -> str | None:
            text = "\n".join(httpx.get(f"http://127.0.0.1:{p}/metrics", timeout=5).text for p in ports)
            left = [v for labels, v in parse_prometheus(text, "ray_farm_trials")
                    if labels.get("sweep") == outcome.sweep_id and labels.get("state") in ("pending", "running")]
            return text if left == [0.0, 0.0] else None
        final_scrape = wait_until(after_the_last_trial, HANG_S, 1.0, "the sweep's metrics after its last trial")
        worker_ids = {w.node_id for w in workers}
        yield dict(outcome=outcome, trials=trials, uri=uri, tmp=tmp, observer=observer,
                   final_scrape=final_scrape, worker_ids=worker_ids, other_id=other.node_id)
    finally:
        ray.shutdown()
        cluster.shutdown()
        restore_env()


def test_every_trial_ran_once_and_is_in_mlflow_once(cluster_sweep):
    from mlflow.tracking import MlflowClient

    outcome, trials = cluster_sweep["outcome"], cluster_sweep["trials"]
    assert len(trials) == 4 and {t.gpus for t in trials} == {1, 2, 3, 4}
    assert sorted(r.trial.id for r in outcome.results) == sorted(t.id for t in trials)
    bad = [(r.trial.label, r.status.value, r.reason) for r in outcome.results if r.status.value != "ok"]
    assert not bad, bad
    client = MlflowClient(cluster_sweep["uri"])
    children = client.search_runs([outcome.experiment_id],
                                  filter_string=f"tags.`mlflow.parentRunId` = '{outcome.sweep_id}'")
    ids = [c.data.tags["farm.trial_id"] for c in children]
    assert sorted(ids) == sorted(t.id for t in trials)  # every trial, each once
    # every run's guidellm client was forked by its node's client host (actors/client_host.py)
    assert all(run.client_forked for r in outcome.results for run in r.runs)


def test_trials_spread_over_both_h200_nodes_and_never_overbook_a_node(cluster_sweep):
    results = cluster_sweep["outcome"].results
    nodes = {r.node_id for r in results}
    assert cluster_sweep["other_id"] not in nodes, "accelerator_type H200: never on the A100 node"
    assert nodes == cluster_sweep["worker_ids"], "trials must run on both H200 nodes, never on the GPU-less head"
    for r in results:
        assert len(r.gpus) == r.trial.gpus, (r.trial.label, r.gpus)
        assert len(set(r.gpus)) == len(r.gpus)
        assert all(0 <= int(g) < GPUS_PER_NODE for g in r.gpus)
    overlapping_pairs = 0
    for node in nodes:
        on_node = [r for r in results if r.node_id == node]
        # At every trial start, the trials running on that node hold at most its GPUs, disjointly.
        for r in on_node:
            at = r.started_at
            running = [o for o in on_node if o.started_at <= at < o.finished_at]
            held = [g for o in running for g in o.gpus]
            assert len(held) <= GPUS_PER_NODE, [(o.trial.label, o.gpus) for o in running]
            assert len(set(held)) == len(held), [(o.trial.label, o.gpus) for o in running]
            overlapping_pairs += len(running) - 1
    # The check above must have had something to check: trials did share nodes at the same time.
    assert overlapping_pairs > 0


def test_each_engine_saw_exactly_its_gpus(cluster_sweep):
    from mlflow.tracking import MlflowClient

    outcome = cluster_sweep["outcome"]
    client = MlflowClient(cluster_sweep["uri"])
    by_trial = {r.trial.id: r for r in outcome.results}
    children = client.search_runs([outcome.experiment_id],
                                  filter_string=f"tags.`mlflow.parentRunId` = '{outcome.sweep_id}'")
    for child in children:
        result = by_trial[child.data.tags["farm.trial_id"]]
        path = client.download_artifacts(child.info.run_id, "files/engine.log", str(cluster_sweep["tmp"] / child.info.run_id))
        seen = [line for line in Path(path).read_text().splitlines() if line.startswith("farm-test engine")]
        assert seen == [f"farm-test engine CUDA_VISIBLE_DEVICES=[{','.join(result.gpus)}]"], (result.trial.label, seen)
        assert child.data.tags["farm.gpus"] == ",".join(result.gpus)


def test_actor_names_are_readable_in_the_state_api(cluster_sweep):
    from farm.run.ray_names import actor_name

    outcome, observer = cluster_sweep["outcome"], cluster_sweep["observer"]
    expected = {actor_name(outcome.sweep_id, t, 1) for t in cluster_sweep["trials"]}
    seen = {n for n in observer.names if n.endswith(":a1") and outcome.sweep_id[:8] in n}
    assert seen, observer.errors[-3:]
    # Each name read is one of the sweep's trials (how many a poll catches alive depends on how
    # busy the machine is: not asserted).
    assert seen <= expected
    for name in seen:
        engine, short, label, sweep, attempt = name.split(":")
        assert engine == "mock" and len(short) == 8 and "gpus=" in label and "ttft-ms=" in label


def test_capacity_refusals_count_only_nodes_of_the_accelerator_type(cluster_sweep):
    """farm's check before a sweep (driver.check_capacity) on this cluster as Ray reports its nodes:
    a head without GPUs, two H200 nodes of 4 GPUs, an A100 node of 8."""
    from farm.errors import UserError
    from farm.run import driver
    from farm.study.spec import EngineSpec
    from farm.study.trial import Trial

    def trial(gpus: int) -> Trial:
        return Trial(id=f"mock-0000000{gpus}", engine="mock", model_key="m", model="farm-tiny", flags={"gpus": gpus},
                     profiles=["p"], gpus=gpus)

    h200 = {"mock": EngineSpec(accelerator_type="H200")}
    driver.check_capacity([trial(GPUS_PER_NODE)], h200)
    with pytest.raises(UserError, match=f"needs 8 GPU\\(s\\) on one node; the largest H200 node has {GPUS_PER_NODE}$"):
        driver.check_capacity([trial(8)], h200)
    driver.check_capacity([trial(8)])  # no type asked: the A100 node fits
    with pytest.raises(UserError, match=r"needs 9 GPU\(s\) on one node; the largest node has 8$"):
        driver.check_capacity([trial(9)])
    b200 = {"mock": EngineSpec(accelerator_type="B200")}
    driver.check_capacity([trial(0)], b200)  # no GPU, no type
    with pytest.raises(UserError, match=r"no node has GPUs of type B200 \(the cluster has: A100, H200\)"):
        driver.check_capacity([trial(1)], b200)


def test_farm_metrics_on_rays_prometheus_endpoint(cluster_sweep):
    from farm.run.metrics import parse_prometheus

    sweep = cluster_sweep["outcome"].sweep_id
    observer = cluster_sweep["observer"]
    # During the sweep: the trials gauge showed trials running.
    running = [v for text in observer.scrapes for labels, v in parse_prometheus(text, "ray_farm_trials")
               if labels.get("sweep") == sweep and labels.get("state") == "running"]
    assert running and max(running) >= 1, observer.errors[-3:]
    # After it: every trial done, every result ok, a throughput per trial.
    final = cluster_sweep["final_scrape"]
    done = [v for labels, v in parse_prometheus(final, "ray_farm_trials")
            if labels.get("sweep") == sweep and labels.get("state") == "done"]
    assert done == [float(len(cluster_sweep["trials"]))]
    ok = [v for labels, v in parse_prometheus(final, "ray_farm_trial_results_total")
          if labels.get("sweep") == sweep and labels.get("status") == "ok"]
    assert ok == [float(len(cluster_sweep["trials"]))]
    tps = {labels["trial"]: v for labels, v in parse_prometheus(final, "ray_farm_trial_total_tps")
           if labels.get("sweep") == sweep and labels.get("profile") == "quick"}
    assert len(tps) == len(cluster_sweep["trials"]) and all(v > 0 for v in tps.values())


def test_the_grafana_dashboard_asks_for_series_ray_exports(cluster_sweep):
    """configs/grafana/farm-sweep.json: every metric its panels and variables query is on Ray's
    endpoint after a real sweep, with every label they select or group by."""
    import json
    import re

    from farm.run.metrics import PREFIX, TAGS, parse_prometheus

    dashboard = json.loads((REPO / "configs" / "grafana" / "farm-sweep.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    final = cluster_sweep["final_scrape"]
    sweep = cluster_sweep["outcome"].sweep_id
    asked = 0
    for expr in exprs:
        by = re.findall(r"by \(([^)]*)\)", expr)
        for name, selector in re.findall(r"(ray_farm_\w+)(?:\{([^}]*)\})?", expr):
            wanted = set(re.findall(r"(\w+)=~?", selector or "")) | {x.strip() for b in by for x in b.split(",")}
            wanted |= set(re.findall(r"label_values\(\w+, (\w+)\)", expr))
            declared = TAGS[name.removeprefix("ray_" + PREFIX).removesuffix("_total")]
            assert wanted <= set(declared), (expr, declared)
            samples = [labels for labels, _ in parse_prometheus(final, name) if labels.get("sweep") == sweep]
            if name != "ray_farm_trial_retries_total":  # a counter shows only once something was retried
                assert samples, f"{expr}: no {name} for the sweep on Ray's endpoint"
            assert all(wanted <= set(labels) for labels in samples), (expr, samples[0])
            asked += 1
    assert asked == len(exprs) >= 8


def test_farm_status_saw_trials_running_then_all_done(cluster_sweep):
    from farm.run.ray_names import actor_name
    from farm.run.sweep_status import sweep_status

    observer = cluster_sweep["observer"]
    assert any(c["running"] >= 1 for c in observer.statuses), (observer.statuses[-3:], observer.errors[-3:])
    assert all(sum(c.values()) == len(cluster_sweep["trials"]) for c in observer.statuses)
    # Found by the sweep's Ray namespace: each live actor there is one of the sweep's trials.
    outcome, trials = cluster_sweep["outcome"], {t.id: t for t in cluster_sweep["trials"]}
    assert observer.found and set(observer.found) <= set(trials), (observer.found, observer.errors[-3:])
    for trial_id, name in observer.found.items():
        assert name == actor_name(outcome.sweep_id, trials[trial_id], 1)
    # (the sweep itself is marked finished by the CLI after its report; run_sweep leaves it running)
    final = sweep_status(cluster_sweep["uri"], cluster_sweep["outcome"].sweep_id)
    assert {state: n for state, n in final.counts().items() if n} == {"done": len(cluster_sweep["trials"])}
