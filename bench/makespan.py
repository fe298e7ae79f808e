"""How long a sweep holds a cluster, against the least it could: the order trials start in.

A simulated cluster (`ray.cluster_utils.Cluster`: a head without GPUs and 2 nodes x 8 declared
GPUs, each node with its own farm cache dir, so its own compile cache) runs a grid shaped like
the `full` grid (configs/qwen3.5-35b-a3b-h200.yaml: compile groups of 2 trials and of 12, all
TP1) plus TP2 trials, on the mock engine (the real `guidellm mock-server`, real guidellm runs,
real Ray actors). Each mock start sleeps the H200's engine start scaled by `--scale`: 241 s cold,
103 s when the node's compile cache holds the trial's group (bench/h200/README.md); each of the
four profiles runs for the H200's duration scaled the same way (its requests all in flight, their
output length x the mock's inter-token latency).

The grid runs twice, each on a fresh cluster: in grid order, placed by Ray (the driver before
farm/analysis/schedule.py), and as the scheduler orders and places it. Per order it prints the
makespan (first actor asked for to last result), the ideal (max(longest trial, GPU-seconds the
trials held / GPUs)), efficiency = ideal / makespan, and the GPU time spent starting engines, in
seconds here and in H200 hours (/ scale). No MLflow: the driver's logging is bench/driver_rate.py's.

    python bench/makespan.py                 # --scale 0.1, 34 TP1 + 4 TP2 trials
    python bench/makespan.py --groups2 4 --groups12 2 --tp2 2
    python bench/makespan.py --model         # the default study's full + tp grids in a model, in a second
    python bench/makespan.py --model --tracking-uri sqlite:///mlflow.db   # ... at what its latest sweep measured

Target (issue "The farm's own cost"): efficiency >= 0.9.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

GPUS_PER_NODE, NODES = 8, 2
H200 = {"cold_start_s": 241.0, "warm_start_s": 103.0}
# Per profile run on the H200 (bench/h200/README.md, shared/reference/h200.md: 40-75 s).
H200_RUN_S = {"throughput": 40.0, "sharegpt": 60.0, "generation_heavy": 58.0, "long_context": 74.0}
ITL_MS = 100  # the mock's inter-token latency: a run's length is its output tokens x this
IN_FLIGHT = 4  # requests per run, all at once


def study_yaml(args) -> dict:
    scale = args.scale
    profiles = {name: {"data": {"kind": "synthetic", "prompt_tokens": 16,
                                "output_tokens": max(1, round(s * scale * 1000 / ITL_MS))},
                       "rate": 1000, "requests": IN_FLIGHT, "max_concurrency": IN_FLIGHT, "max_seconds": 300,
                       "slo": {"min_success_rate": 0.5}}
                for name, s in H200_RUN_S.items()}
    start = {"start-s": round(H200["cold_start_s"] * scale, 1), "warm-start-s": round(H200["warm_start_s"] * scale, 1),
             "itl-ms": ITL_MS, "ttft-ms": 1}
    blocks = []
    # The `full` grid: the seed's flags give compile groups of 2 (prefix caching both ways), the
    # other methods groups of 12 (what does not change the graph: sequence limit, memory, offload).
    for g in range(args.groups2):
        blocks.append({"engine": "mock", "models": ["tiny"], "flags": {**start, "graph": f"seed-{g}", "gpus": 1},
                       "axes": {"max-concurrent-requests": [64, 128]}})
    for g in range(args.groups12):
        blocks.append({"engine": "mock", "models": ["tiny"], "flags": {**start, "graph": f"other-{g}", "gpus": 1},
                       "axes": {"max-concurrent-requests": list(range(200, 200 + 12))}})
    if args.tp2:
        blocks.append({"engine": "mock", "models": ["tiny"], "flags": {**start, "graph": "tp2", "gpus": 2},
                       "axes": {"max-concurrent-requests": list(range(300, 300 + args.tp2))}})
    return {"name": "makespan", "experiment": "makespan", "accelerator_type": "H200",
            "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
            "engines": {"mock": {"ready_timeout_s": 600}}, "profiles": profiles,
            "primary_profile": "throughput", "max_retries": 0,
            "grids": {"full": {"profiles": list(H200_RUN_S), "max_concurrent_trials": GPUS_PER_NODE * NODES,
                               "blocks": blocks}}}


def run_order(study, trials, scheduled: bool, tmp: Path) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from actors.bench import TrialJob
    from farm.analysis import schedule
    from farm.run import driver

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    for n in range(NODES):
        cache = tmp / f"{'plan' if scheduled else 'grid'}-node{n}"
        cluster.add_node(num_cpus=GPUS_PER_NODE, num_gpus=GPUS_PER_NODE, resources={"accelerator_type:H200": 1},
                         env_vars={"FARM_CACHE_DIR": str(cache)})
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        jobs = [TrialJob(sweep_id="makespan", trial=t, engine_spec=study.engines[t.engine],
                         profiles={p: study.profiles[p] for p in t.profiles}, workdir=str(tmp / "runs"))
                for t in trials]
        items = schedule.items_of(study, trials) if scheduled else None
        started = time.monotonic()
        results = driver.run_trials(jobs, max_in_flight=study.grids["full"].max_concurrent_trials, max_retries=0,
                                    items=items)
        makespan = time.monotonic() - started
    finally:
        ray.shutdown()
        cluster.shutdown()
    bad = [(r.trial.label, r.status.value, r.reason) for r in results if r.status.value != "ok"]
    walls = [(r.finished_at - r.started_at) for r in results]
    gpu_s = sum(w * r.trial.gpus for w, r in zip(walls, results))
    start_gpu_s = sum(float(r.engine_reported.get("ready_s", 0.0)) * r.trial.gpus for r in results)
    cold = sum(1 for r in results if r.engine_reported.get("compile_cache_hit") is False)
    ideal = max(max(walls), gpu_s / (GPUS_PER_NODE * NODES))
    return {"order": "scheduled" if scheduled else "grid order", "trials": len(results), "failed": bad,
            "makespan": makespan, "ideal": ideal, "efficiency": ideal / makespan, "gpu_s": gpu_s,
            "start_gpu_s": start_gpu_s, "cold": cold}


def model(items: list, nodes: dict[str, int], scheduled: bool, shared: bool = False, prewarmed: bool = False) -> dict:
    """The same two orders in a model of the cluster (no processes): trials take their estimates,
    plus the cold start's extra where the node's compile cache does not hold their group yet. Grid
    order: the next trial goes where most GPUs are free (Ray's SPREAD), in grid order."""
    from farm.analysis.schedule import Dispatcher

    dispatcher = Dispatcher(list(items)) if scheduled else None
    queue = list(items)
    now, running, ran, cache = 0.0, [], [], {}
    if prewarmed:  # the next sweep with the packs kept (compile_cache: DIR): every group warm from the start
        cache = {("*", i.group): -1.0 for i in items}
        shared = True
    while (dispatcher.pending if dispatcher else queue) or running:
        free = dict(nodes)
        for end, node, item in running:
            free[node] -= item.gpus
        while True:
            if dispatcher:
                picked = dispatcher.next(free, now)
            else:
                fit = [n for n in sorted(free, key=lambda n: -free[n]) if queue and free[n] >= queue[0].gpus]
                picked = (queue.pop(0), fit[0]) if fit else None
            if picked is None:
                break
            item, node = picked
            free[node] -= item.gpus
            if dispatcher:
                dispatcher.started(item, node, now)
            # shared: a group's cache published by its first start on any node (actors/compile_cache.py)
            where = "*" if shared else node
            written = cache.get((where, item.group))
            cold = written is None or written > now
            cache.setdefault((where, item.group), now + (item.cold_start_s if cold else item.warm_start_s))
            end = now + item.seconds + (item.cold_extra_s if cold else 0.0)
            running.append((end, node, item))
            ran.append((now, end, item, cold))
        later = [w for w in cache.values() if w > now]
        now = min([e for e, _, _ in running] + later)
        running = [r for r in running if r[0] > now]
    makespan = max(e for _, e, _, _ in ran)
    gpu_s = sum((e - b) * i.gpus for b, e, i, _ in ran)
    ideal = max(max(e - b for b, e, _, _ in ran), gpu_s / sum(nodes.values()))
    start = sum((i.cold_start_s if c else i.warm_start_s) * i.gpus for _, _, i, c in ran)
    return {"order": "scheduled" if scheduled else "grid order", "trials": len(ran), "makespan": makespan,
            "ideal": ideal, "efficiency": ideal / makespan, "gpu_s": gpu_s, "start_gpu_s": start,
            "cold": sum(c for *_, c in ran), "failed": []}


def print_model(tracking_uri: str | None = None) -> None:
    from farm.analysis.schedule import items_of
    from farm.study.grid import expand
    from farm.study.load import load_study

    study = load_study()
    trials = expand(study, "full") + expand(study, "tp")
    measured = None
    if tracking_uri:  # the durations a sweep would be scheduled at (farm/run/estimate.py)
        from farm.run.estimate import schedule_durations

        measured, line = schedule_durations(tracking_uri, study)
        print(line)
    items = list(items_of(study, trials, measured).values())
    nodes = {f"node{n}": GPUS_PER_NODE for n in range(NODES)}
    at = ("the measured durations above" if measured else
          "farm's estimates (vLLM 240 s cold / 103 s warm, SGLang 240 / 80, the seed's run durations)")
    print(f"model (no processes): the default study's full + tp grids, {len(items)} distinct trials "
          f"({sum(i.gpus > 1 for i in items)} of 2 GPUs), at {at}, {NODES} x {GPUS_PER_NODE} GPUs")
    print(f"{'order':<11}  {'trials':>6}  {'makespan h':>10}  {'ideal h':>7}  {'efficiency':>10}  {'GPU-h held':>10}  "
          f"{'GPU-h starting':>14}  {'cold starts':>11}")
    for r in (model(items, nodes, False), model(items, nodes, True)):
        print(f"{r['order']:<11}  {r['trials']:>6}  {r['makespan'] / 3600:>10.2f}  {r['ideal'] / 3600:>7.2f}  "
              f"{r['efficiency']:>10.2f}  {r['gpu_s'] / 3600:>10.1f}  {r['start_gpu_s'] / 3600:>14.1f}  {r['cold']:>11}")
    # Issue "Warm starts": starts with each node's own compile cache against one shared by the
    # cluster (a group compiled once in all), scheduled order, N nodes of 8 GPUs.
    print(f"{'nodes x 8':>9}  {'cache':<8}  {'makespan h':>10}  {'GPU-h starting':>14}  {'cold starts':>11}")
    for n in (1, 2, 4, 16):
        cluster = {f"node{i}": GPUS_PER_NODE for i in range(n)}
        for shared, prewarmed, label in ((False, False, "per node"), (True, False, "shared"),
                                         (True, True, "kept")):
            r = model(items, cluster, True, shared=shared, prewarmed=prewarmed)
            print(f"{n:>9}  {label:<8}  {r['makespan'] / 3600:>10.2f}  "
                  f"{r['start_gpu_s'] / 3600:>14.1f}  {r['cold']:>11}")
    print("per node: each node's own cache; shared: one pack a group for the whole cluster (Ray's object store); "
          "kept: the next sweep, with the packs of this one in compile_cache: DIR")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.1, help="simulated seconds per H200 second")
    parser.add_argument("--groups2", type=int, default=5, help="compile groups of 2 TP1 trials")
    parser.add_argument("--groups12", type=int, default=2, help="compile groups of 12 TP1 trials")
    parser.add_argument("--tp2", type=int, default=4, help="TP2 trials (one compile group)")
    parser.add_argument("--only", choices=["grid", "scheduled"], help="run one order only")
    parser.add_argument("--model", action="store_true", help="only the model of the default study's grids")
    parser.add_argument("--tracking-uri", help="with --model: the durations the study's latest sweep there measured")
    args = parser.parse_args()
    if args.tracking_uri and not args.model:
        parser.error("--tracking-uri goes with --model")
    if args.model:
        print_model(args.tracking_uri)
        return

    from raynodes import LOOPBACK_ENV, set_env

    from farm.study.grid import expand
    from farm.study.load import load_study

    os.environ.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", "1")
    restore = set_env(LOOPBACK_ENV)
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="farm-makespan-") as tmp:
            path = Path(tmp) / "study.yaml"
            path.write_text(yaml.safe_dump(study_yaml(args), sort_keys=False))
            study = load_study(path)
            trials = expand(study, "full")
            for scheduled in (False, True):
                if args.only and args.only != ("scheduled" if scheduled else "grid"):
                    continue
                rows.append(run_order(study, trials, scheduled, Path(tmp)))
    finally:
        restore()
    n1 = sum(1 for t in trials if t.gpus == 1)
    print(f"makespan on a simulated cluster: {NODES} nodes x {GPUS_PER_NODE} GPUs, {n1} TP1 + {len(trials) - n1} TP2 "
          f"mock trials x 4 profiles, H200 durations x {args.scale} (starts {H200['cold_start_s'] * args.scale:.1f} s "
          f"cold / {H200['warm_start_s'] * args.scale:.1f} s warm); {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    print(f"{'order':<11}  {'trials':>6}  {'makespan s':>10}  {'ideal s':>7}  {'efficiency':>10}  {'GPU-s held':>10}  "
          f"{'GPU-s starting':>14}  {'cold starts':>11}  {'H200 GPU-h starting':>19}")
    for r in rows:
        print(f"{r['order']:<11}  {r['trials']:>6}  {r['makespan']:>10.1f}  {r['ideal']:>7.1f}  {r['efficiency']:>10.2f}  "
              f"{r['gpu_s']:>10.0f}  {r['start_gpu_s']:>14.0f}  {r['cold']:>11}  "
              f"{r['start_gpu_s'] / args.scale / 3600:>19.2f}")
        if r["failed"]:
            print(f"  not ok: {r['failed'][:5]}")
    print("target: efficiency >= 0.9; ideal = max(longest trial, GPU-seconds held / GPUs)")


if __name__ == "__main__":
    main()
