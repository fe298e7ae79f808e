"""How often successive halving finds the full grid's best, and at what share of its GPU-hours.

    python bench/search.py [--seeds 20] [--budget-share 0.30]

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
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from farm.analysis import halving as h  # noqa: E402
from farm.analysis.stats import relative_difference  # noqa: E402

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


def landscape(cfg: dict[str, int], profile: str) -> float:
    base = {"chat": 1000.0, "throughput": 4000.0, "long_context": 9000.0, "generation_heavy": 1500.0}[profile]
    effect = sum(MAIN[k][v] for k, v in cfg.items()) + AB.get((cfg["a"], cfg["b"]), 0.0)
    if profile != "chat":
        effect += sum(GEN_SHIFT[k][v] for k, v in cfg.items())
    return base * (1 + effect)


def name(cfg: dict[str, int]) -> str:
    return "".join(f"{k}{v}" for k, v in cfg.items())


def measure(rng: random.Random, cfg: dict, profile: str, requests: int) -> float:
    sigma = NOISE_FULL * math.sqrt(PROFILES[profile] / requests)
    return landscape(cfg, profile) * math.exp(rng.gauss(0, sigma))


def run_seconds(profile: str, requests: int) -> float:
    return OVERHEAD_S + RUN_SECONDS[profile] * requests / PROFILES[profile]


def full_grid(rng: random.Random, configs: dict[str, dict]) -> tuple[dict[str, list[float]], float]:
    samples = {t: [measure(rng, c, "chat", PROFILES["chat"]) for _ in range(FULL_REPEATS)] for t, c in configs.items()}
    per_trial = START_S + FULL_REPEATS * sum(run_seconds(p, n) for p, n in PROFILES.items())
    return samples, per_trial * len(configs) / 3600


def halving_pick(rng: random.Random, configs: dict[str, dict], budget: float) -> tuple[str | None, float]:
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
            o.samples[p.rung.index] = [measure(rng, configs[t], "chat", p.rung.requests[p.rung.primary])
                                       for _ in range(p.rung.repeats)]
    last = rungs[-1].index
    final = {t: o.samples[last] for t, o in observed.items() if o.samples.get(last)}
    if not final:  # the budget ended before the last rung: the best of the furthest rung
        furthest = max((r for o in observed.values() for r in o.samples), default=None)
        final = {t: o.samples[furthest] for t, o in observed.items() if o.samples.get(furthest)}
    pick = max(final, key=lambda t: sum(final[t]) / len(final[t])) if final else None
    return pick, p.spent_gpu_hours


def stepwise_pick(rng: random.Random) -> tuple[str, float]:
    """One knob change at a time from the defaults, kept when its single run beats the current one."""
    current = {k: 0 for k in KNOBS}
    score = measure(rng, current, "chat", PROFILES["chat"])
    tried = 1
    for knob, values in KNOBS.items():
        for v in values[1:]:
            cand = {**current, knob: v}
            s = measure(rng, cand, "chat", PROFILES["chat"])
            tried += 1
            if s > score:
                current, score = cand, s
    per_trial = START_S + sum(run_seconds(p, n) for p, n in PROFILES.items())
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
    ap.add_argument("--start-s", type=float, default=START_S, help="engine start seconds (250: a cold start on the H200)")
    args = ap.parse_args(argv)
    globals()["START_S"] = args.start_s
    configs = {name(dict(zip(KNOBS, vs))): dict(zip(KNOBS, vs)) for vs in itertools.product(*KNOBS.values())}
    true_best = max(configs, key=lambda t: landscape(configs[t], "chat"))
    t0 = time.monotonic()
    rows = []
    for seed in range(args.seeds):
        rng = random.Random(seed)
        samples, grid_h = full_grid(rng, configs)
        best = max(samples, key=lambda t: sum(samples[t]) / len(samples[t]))
        pick, spent = halving_pick(random.Random(1000 + seed), configs, args.budget_share * grid_h)
        step, step_h = stepwise_pick(random.Random(2000 + seed))
        rows.append((seed, best, pick, spent / grid_h, tied_or_best(pick, best, samples), step,
                     tied_or_best(step, best, samples), step_h / grid_h))
    print(f"{len(configs)} trials, {len(PROFILES)} profiles, engine start {START_S:g} s; true best {true_best}; full grid {grid_h:.1f} GPU-hours "
          f"(every trial, every profile, {FULL_REPEATS} repeats); halving budget {args.budget_share:.0%} of it")
    print(f"{'seed':>4} {'grid best':>9} {'halving':>8} {'share':>6} {'hit':>4} {'stepwise':>8} {'hit':>4}")
    for seed, best, pick, share, hit, step, shit, _ in rows:
        print(f"{seed:>4} {best:>9} {pick or '-':>8} {share:>6.1%} {'yes' if hit else 'no':>4} {step:>8} "
              f"{'yes' if shit else 'no':>4}")
    n = len(rows)
    hits = sum(r[4] for r in rows)
    shares = sorted(r[3] for r in rows)
    print(f"halving: best or tied with it in {hits} of {n} seeds ({hits / n:.0%}); GPU-hours {min(shares):.1%} to "
          f"{max(shares):.1%} of the full grid (median {shares[n // 2]:.1%})")
    shits = sum(r[6] for r in rows)
    print(f"stepwise: best or tied with it in {shits} of {n} seeds ({shits / n:.0%}); "
          f"{rows[0][7]:.1%} of the full grid's GPU-hours (single runs)")
    print(f"({time.monotonic() - t0:.1f} s on {platform.machine()}, {platform.python_version()})")
    return 0 if hits / n >= 0.9 and max(shares) <= args.budget_share + 1e-9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
