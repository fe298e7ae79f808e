"""How often each search finds the full grid's best, and at what share of its GPU-hours:
successive halving, the seed's stepwise method, and farm's local search from a given start.

    python bench/search.py [--seeds 20] [--budget-share 0.30] [--landscapes all]

Landscapes (`--landscapes`, comma-separated or `all`): `interacting` (below), `single_peak`
(one optimum, smooth), `ridge` (two knobs good only together along a diagonal), `two_optima`
(a local optimum near the start, the global one far), `noisy_flat` (every trial within 1 %),
and `h200`: the five vLLM configurations the seed measured on the H200, at the means and the
run-to-run spread of `bench/h200/results.json` on its primary profile. The local search starts
where a user would: the engine defaults (`h200`: the seed's recommended command, step3).

A mock landscape of four knobs with interacting effects (a = 2 alone costs 5 %, b = 2 alone 4 %,
both together gain 25 %; c and d add a little on their own): 3 x 3 x 3 x 2 = 54 trials, the
seed's four profiles at its sizes (chat, the primary, 1000 requests; throughput; long_context;
generation_heavy). The seed's stepwise method (one knob
change at a time from the engine defaults, kept when its single run beats the configuration it
builds on: the rule of farm/analysis/selection/stepwise.py) never tries a = 2 with b = 2, so it
stops on a local optimum.

Measurements are SIMULATED, not run: each run's total tok/s is the landscape's value times
log-normal noise (1.5 % on a full-length run, growing as 1/sqrt(requests) on the shorter runs of
the early rungs), and each trial's wall time is an engine start (103 s: the H200 engine start with its compile cache kept;
`--start-s`) plus, per run, 15 s of
overhead and the profile's seconds scaled by its requests. Halving is farm's own pure planner
(farm/analysis/halving.py: `next_rung`, its rungs, its alpha, its budget rule) driven by those
measurements; the end-to-end test (tests/e2e/test_halving_sweep.py) runs the same planner through
the CLI on the real mock engine.

For each seed: the full grid (every trial, every profile, 3 repeats) is simulated; its best is the
trial with the best mean on the primary profile. Halving, given `--budget-share` of the full grid's
GPU-hours, picks the best mean of its last rung; it is a hit when the full grid's own runs of that
pick are not significantly worse than the full grid's best (Welch at 0.05: tied within its
interval). Stepwise is a hit by the same test.
"""

from __future__ import annotations

import argparse
import itertools
import math
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from farm.analysis import halving as h  # noqa: E402
from farm.analysis import local_search as ls  # noqa: E402
from farm.analysis.results import HeldSpan, ProfileRun, RunMetrics, Status, TrialResult  # noqa: E402
from farm.analysis.stats import relative_difference  # noqa: E402
from farm.study.trial import Trial  # noqa: E402

# The seed's four profiles at its sizes and its measured run seconds (farm/study/grid.py), chat primary.
PROFILES = {"chat": 1000, "throughput": 1000, "long_context": 100, "generation_heavy": 200}
RUN_SECONDS = {"chat": 124.99, "throughput": 40.37, "long_context": 73.72, "generation_heavy": 57.74}
# The engine start on the H200 with its compile cache kept (103 s, ../shared/reference/h200.md); --start-s 250: cold
START_S, OVERHEAD_S = 103.0, 15.0
NOISE_FULL = 0.015
FULL_REPEATS = 3
KNOBS = {"a": [0, 1, 2], "b": [0, 1, 2], "c": [0, 1, 2], "d": [0, 1]}
MAIN = {"a": [0, -0.03, -0.05], "b": [0, -0.02, -0.04], "c": [0, 0.03, 0.01], "d": [0, 0.02]}
AB = {(1, 1): 0.04, (1, 2): 0.12, (2, 1): 0.10, (2, 2): 0.25}
GEN_SHIFT = {"a": [0, 0.01, 0.02], "b": [0, 0, -0.01], "c": [0, -0.01, 0], "d": [0, 0]}


@dataclass
class Land:
    """A landscape: its trials' coordinates, each one's true total tok/s per profile, the noise."""

    name: str
    configs: dict[str, dict[str, int]]
    value: Callable[[dict[str, int], str], float]
    start: str
    noise: float = NOISE_FULL


def _interacting(cfg: dict[str, int], profile: str) -> float:
    base = {"chat": 1000.0, "throughput": 4000.0, "long_context": 9000.0, "generation_heavy": 1500.0}[profile]
    effect = sum(MAIN[k][v] for k, v in cfg.items()) + AB.get((cfg["a"], cfg["b"]), 0.0)
    if profile != "chat":
        effect += sum(GEN_SHIFT[k][v] for k, v in cfg.items())
    return base * (1 + effect)


def _base(profile: str) -> float:
    return {"chat": 1000.0, "throughput": 4000.0, "long_context": 9000.0, "generation_heavy": 1500.0}[profile]


def _single_peak(cfg: dict[str, int], profile: str) -> float:
    target = {"a": 2, "b": 1, "c": 2, "d": 1}
    return _base(profile) * (1 + 0.30 - 0.06 * sum(abs(cfg[k] - target[k]) for k in cfg))


def _ridge(cfg: dict[str, int], profile: str) -> float:
    # a and b help only together, along the diagonal: off it, each costs
    return _base(profile) * (1 + (0.10 * cfg["a"] if cfg["a"] == cfg["b"] else -0.04 * abs(cfg["a"] - cfg["b"]))
                             + 0.02 * cfg["d"])


def _two_optima(cfg: dict[str, int], profile: str) -> float:
    near = 0.06 if (cfg["a"], cfg["b"]) == (1, 0) else 0.0   # one step from the defaults
    far = 0.20 if (cfg["a"], cfg["b"], cfg["c"]) == (2, 2, 2) else 0.0
    return _base(profile) * (1 + near + far - 0.01 * (cfg["a"] + cfg["b"] + cfg["c"]))


def _noisy_flat(cfg: dict[str, int], profile: str) -> float:
    return _base(profile) * (1 + 0.0025 * ((cfg["a"] * 7 + cfg["b"] * 3 + cfg["c"] * 5 + cfg["d"]) % 5))


def _grid_configs() -> dict[str, dict[str, int]]:
    return {name(dict(zip(KNOBS, vs))): dict(zip(KNOBS, vs)) for vs in itertools.product(*KNOBS.values())}


def h200_land() -> Land:
    """The seed's five vLLM steps as the H200 measured them (bench/h200/results.json, the primary
    profile): coordinates along the seed's chain, true values at the measured means, the noise at
    the spread of the trials measured three times; the other profiles in proportion."""
    import json

    data = json.loads((Path(__file__).resolve().parent / "h200" / "results.json").read_text())
    primary = data["primary_profile"]
    steps = ["engine_vllm_default", "step1_quant_fp8", "step2_prefix_cache", "step3_performance_mode",
             "step4_kv_cache_fp8"]
    runs: dict[str, list[float]] = {}
    for r in data["runs"]:
        label = r.get("name") or r.get("trial")
        if r["profile"] == primary and r["status"] == "ok" and label in steps:
            runs.setdefault(label, []).append(r["metrics"]["total_tps"])
    means = {k: sum(v) / len(v) for k, v in runs.items()}
    cvs = [statistics.stdev(v) / (sum(v) / len(v)) for v in runs.values() if len(v) > 1]
    coords = {s: {"a": min(i, 1), "b": int(i >= 2), "c": int(i >= 3), "d": int(i >= 4)} for i, s in enumerate(steps)}
    by_cfg = {name(c): s for s, c in coords.items()}
    configs = {name(c): c for c in coords.values()}
    return Land("h200", configs, lambda cfg, profile: means[by_cfg[name(cfg)]] * _base(profile) / _base("chat"),
                start=name(coords["step3_performance_mode"]),
                noise=statistics.mean(cvs) if cvs else NOISE_FULL)


def lands(names: str) -> list[Land]:
    grid = _grid_configs()
    defaults = name({k: 0 for k in KNOBS})
    every = {"interacting": Land("interacting", grid, _interacting, defaults),
             "single_peak": Land("single_peak", grid, _single_peak, defaults),
             "ridge": Land("ridge", grid, _ridge, defaults),
             "two_optima": Land("two_optima", grid, _two_optima, defaults),
             "noisy_flat": Land("noisy_flat", grid, _noisy_flat, defaults)}
    chosen = list(every) + ["h200"] if names == "all" else names.split(",")
    return [every[n] if n in every else h200_land() for n in chosen]


def name(cfg: dict[str, int]) -> str:
    return "".join(f"{k}{v}" for k, v in cfg.items())


def measure(rng: random.Random, land: Land, cfg: dict, profile: str, requests: int) -> float:
    sigma = land.noise * math.sqrt(PROFILES[profile] / requests)
    return land.value(cfg, profile) * math.exp(rng.gauss(0, sigma))


def run_seconds(profile: str, requests: int) -> float:
    return OVERHEAD_S + RUN_SECONDS[profile] * requests / PROFILES[profile]


def full_grid(rng: random.Random, land: Land) -> tuple[dict[str, list[float]], float]:
    samples = {t: [measure(rng, land, c, "chat", PROFILES["chat"]) for _ in range(FULL_REPEATS)]
               for t, c in land.configs.items()}
    per_trial = START_S + FULL_REPEATS * sum(run_seconds(p, n) for p, n in PROFILES.items())
    return samples, per_trial * len(land.configs) / 3600


def halving_pick(rng: random.Random, land: Land, budget: float) -> tuple[str | None, float]:
    configs = land.configs
    rungs = h.build_rungs(list(PROFILES), "chat", PROFILES, len(configs), final_repeats=FULL_REPEATS)
    priors = h.Priors(start_s=START_S, run_s=RUN_SECONDS, full_requests=PROFILES, run_overhead_s=OVERHEAD_S)
    trials = list(configs)
    observed: dict[str, h.Observed] = {}
    while True:
        p = h.next_rung(rungs, trials, observed, priors=priors, budget_gpu_hours=budget, gpus={t: 1 for t in trials})
        if p.done:
            break
        for t in p.trials:
            o = observed.setdefault(t, h.Observed(gpus=1))
            o.ran.append(p.rung.index)
            runs = {n: [run_seconds(prof, p.rung.requests[n])] * p.rung.repeats for n, prof in p.rung.profiles.items()}
            o.run_s[p.rung.index] = runs
            o.wall_s[p.rung.index] = START_S + sum(map(sum, runs.values()))
            o.samples[p.rung.index] = [measure(rng, land, configs[t], "chat", p.rung.requests[p.rung.primary])
                                       for _ in range(p.rung.repeats)]
    last = rungs[-1].index
    final = {t: o.samples[last] for t, o in observed.items() if o.samples.get(last)}
    if not final:  # the budget ended before the last rung: the best of the furthest rung
        furthest = max((r for o in observed.values() for r in o.samples), default=None)
        final = {t: o.samples[furthest] for t, o in observed.items() if o.samples.get(furthest)}
    pick = max(final, key=lambda t: sum(final[t]) / len(final[t])) if final else None
    return pick, p.spent_gpu_hours


def local_pick(rng: random.Random, land: Land, budget: float | None) -> tuple[str, float]:
    """farm's own local search (farm/analysis/local_search.py: `plan`, its steps, its alpha, its
    budget) from the landscape's start, driven by simulated runs; the final comparison included."""
    trials = [Trial(id=t, engine="sim", model_key="m", model="m", flags=dict(c), profiles=list(PROFILES), index=i)
              for i, (t, c) in enumerate(land.configs.items())]
    coords = ls.coordinates(trials, {})
    per_step = START_S + ls.STEP_REPEATS * run_seconds("chat", round(PROFILES["chat"] / ls.STEP_SHRINK))
    final_s = START_S + ls.FINAL_REPEATS * sum(run_seconds(p, n) for p, n in PROFILES.items())
    results: dict[str, TrialResult] = {}
    while True:
        p = ls.plan(land.start, trials, coords, list(results.values()), primary="chat", requests=PROFILES,
                    profiles=list(PROFILES), budget_gpu_hours=budget,
                    trial_estimate_gpu_hours={"step": per_step / 3600, "final": final_s / 3600})
        if p.done:
            return p.incumbent, p.spent_gpu_hours
        for t in p.trials:
            cfg = land.configs[t]
            runs = [ProfileRun(profile=name_, repeat=r, status=Status.ok, pass_index=p.rung.index,
                               metrics=_metrics(measure(rng, land, cfg, prof, p.rung.requests[name_])))
                    for name_, prof in p.rung.profiles.items() for r in range(p.rung.repeats)]
            seconds = START_S + sum(run_seconds(prof, p.rung.requests[n]) * p.rung.repeats
                                    for n, prof in p.rung.profiles.items())
            old = results.get(t)
            span = HeldSpan(pass_index=p.rung.index, started_at=0.0, finished_at=seconds)
            results[t] = TrialResult(sweep_id="sim", trial=trials[list(land.configs).index(t)], status=Status.ok,
                                     runs=(old.runs if old else []) + runs,
                                     spans=(old.spans if old else []) + [span], started_at=0.0, finished_at=seconds)


def _metrics(tps: float) -> RunMetrics:
    return RunMetrics(successful_requests=1, total_requests=1, success_rate=1.0, duration_s=1.0, total_input_tokens=1,
                      total_output_tokens=1, request_throughput=1.0, output_tps=tps, total_tps=tps)


def stepwise_pick(rng: random.Random, land: Land) -> tuple[str, float]:
    """One knob change at a time from the defaults, kept when its single run beats the current one
    (on a landscape that is not a product grid: along its trials, in order)."""
    per_trial = START_S + sum(run_seconds(p, n) for p, n in PROFILES.items())
    if len(land.configs) != len(_grid_configs()):
        order = list(land.configs)
        current, score = order[0], measure(rng, land, land.configs[order[0]], "chat", PROFILES["chat"])
        for t in order[1:]:
            s = measure(rng, land, land.configs[t], "chat", PROFILES["chat"])
            if s > score:
                current, score = t, s
        return current, len(order) * per_trial / 3600
    current = {k: 0 for k in KNOBS}
    score = measure(rng, land, current, "chat", PROFILES["chat"])
    tried = 1
    for knob, values in KNOBS.items():
        for v in values[1:]:
            cand = {**current, knob: v}
            s = measure(rng, land, cand, "chat", PROFILES["chat"])
            tried += 1
            if s > score:
                current, score = cand, s
    return name(current), tried * per_trial / 3600


def tied_or_best(pick: str | None, best: str, samples: dict[str, list[float]]) -> bool:
    if pick is None:
        return False
    if pick == best:
        return True
    d = relative_difference(samples[best], samples[pick], confidence=0.95)
    return not (d.significant and (d.relative or 0) > 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget-share", type=float, default=0.30)
    ap.add_argument("--landscapes", default="all", help="comma-separated, or all")
    ap.add_argument("--start-s", type=float, default=START_S, help="engine start seconds (250: a cold start on the H200)")
    args = ap.parse_args(argv)
    globals()["START_S"] = args.start_s
    t0 = time.monotonic()
    print(f"engine start {START_S:g} s; full grid: every trial, every profile, {FULL_REPEATS} repeats; halving and "
          f"local search at {args.budget_share:.0%} of its GPU-hours (local: the search's budget, its final comparison "
          f"on top); a hit: the pick is the full grid's best or not significantly worse (Welch, 0.05)")
    print(f"{'landscape':<12} {'trials':>6} {'true best':>9} {'start':>6} | {'halving':>14} | {'stepwise':>14} | "
          f"{'local':>14} | {'local ends':>10}")
    ok = True
    for land in lands(args.landscapes):
        true_best = max(land.configs, key=lambda t: land.value(land.configs[t], "chat"))
        rows = []
        for seed in range(args.seeds):
            samples, grid_h = full_grid(random.Random(seed), land)
            best = max(samples, key=lambda t: sum(samples[t]) / len(samples[t]))
            pick, spent = halving_pick(random.Random(1000 + seed), land, args.budget_share * grid_h)
            step, step_h = stepwise_pick(random.Random(2000 + seed), land)
            local, local_h = local_pick(random.Random(3000 + seed), land, args.budget_share * grid_h)
            rows.append((tied_or_best(pick, best, samples), spent / grid_h, tied_or_best(step, best, samples),
                         step_h / grid_h, tied_or_best(local, best, samples), local_h / grid_h, local == land.start))
        n = len(rows)

        def cell(hit_i: int, share_i: int) -> str:
            hits = sum(r[hit_i] for r in rows)
            shares = sorted(r[share_i] for r in rows)
            return f"{hits:>2}/{n} {shares[n // 2]:>6.1%}"

        stayed = sum(r[6] for r in rows)
        print(f"{land.name:<12} {len(land.configs):>6} {true_best:>9} {land.start:>6} | {cell(0, 1):>14} | "
              f"{cell(2, 3):>14} | {cell(4, 5):>14} | {f'start {stayed}/{n}':>10}")
        if land.name == "interacting":
            ok = ok and sum(r[0] for r in rows) / n >= 0.9
    print("cells: hits / seeds, median share of the full grid's GPU-hours")
    print(f"({time.monotonic() - t0:.1f} s on {platform.machine()}, {platform.python_version()})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
