"""Power: how often does farm decide a 5 % difference at a 2 % CV within 5 runs each?

Two parts, each printing a table (a benchmark, not a test):

1. Simulated (`--simulate N`, default 4000 pairs a row): two configurations whose throughput is
   lognormal with a given CV, the second `diff` faster, judged by farm's own decision code, as a
   sweep's report would judge them: `compare_winner` (selection's verdict: Welch on the logs,
   better / worse / equivalent within ±3 % / undecided) for a study with `repeats: 3` or `5`
   (α 0.05), and for `--repeats auto` the pass plan (`farm.analysis.plan.next_pass`: 3 runs each,
   then 2 more while the decision is open), each look at its level from the alpha-spending rule
   (farm/study/repeats.py), for a run budget of 5 runs each (`max_runs: 10`, looks at 3 and 5)
   and for the default budget (18 runs, looks at 3, 5, 7, 9), beside the old rule (0.01 a look).
   "Decided within 5 runs each" is the verdict after at most 5 runs a side; "right" means
   `better` for the faster one.
2. Measured (`--measure N`): the same on real runs: two mock configurations (`guidellm
   mock-server`, the second with a shorter inter-token latency or time to first token: `--itl-ms-b`,
   `--ttft-ms-b`), each through farm's
   `TrialRunner` with real guidellm, in batches like bench/aa.py's (one long-lived pair of servers
   a batch, one run at a time in a seeded random interleaving, each comparison a disjoint random
   subset of 5 runs a side), judged by farm's selection (`records_from_trials` -> `select`) and
   pass plan. It prints the measured ratio and CV beside the decisions: the CV on a shared 2-core
   machine is what it is, and says which row of the simulated table the measured one belongs to.

    python bench/power.py                                        # the simulated table
    python bench/power.py --simulate 0 --measure 40 --runs-file /tmp/power-runs.jsonl
    python bench/power.py --simulate 0 --analyze /tmp/power-runs.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

FIRST, MOST, LONGER = 3, 5, 9


# ---------------------------------------------------------------------------------------------
# simulated


def _verdict(a, b, alpha):
    from farm.analysis.stats import compare_winner

    v = compare_winner({"a": a, "b": b}, baseline="a", alpha=alpha)
    c = v.comparisons[0]
    right = c.decided.decision == "better" and v.leader == "b" or c.decided.decision == "worse" and v.leader == "a"
    wrong = c.decided.decision in ("better", "worse") and not right
    return "right" if right else "wrong" if wrong else c.decided.decision


def _auto(a, b, looks: int, most: int) -> tuple[str, int]:
    """`--repeats auto` on two trials whose run budget plans `looks` looks (3, 5, 7, ... runs each):
    3 runs each, then the pass plan asks for 2 more while the decision is open, each look judged at
    its own level (`alpha_for('auto', look, looks)`, as `settings_for` gives a sweep's report); the
    verdict after at most `most` runs each."""
    from farm.analysis.plan import alpha_for, next_pass

    n, look = FIRST, 1
    while True:
        alpha = alpha_for("auto", look, looks)
        plan = next_pass({"a": a[:n], "b": b[:n]}, cost_per_repeat={}, passes_done=look, spent=0, budget=10_000,
                         alpha=alpha, max_passes=looks)
        if plan.done or n + plan.repeats > most:
            return _verdict(a[:n], b[:n], alpha), n
        n, look = n + plan.repeats, look + 1


def _old_auto(a, b, most: int = MOST) -> tuple[str, int]:
    """The rule before December 2026, for comparison: every look at 0.01 (0.05 / 5 looks, Bonferroni)."""
    from farm.analysis.plan import next_pass

    n = FIRST
    while True:
        plan = next_pass({"a": a[:n], "b": b[:n]}, cost_per_repeat={}, passes_done=(n - FIRST) // 2 + 1, spent=0,
                         budget=10_000, alpha=0.01)
        if plan.done or n + plan.repeats > most:
            return _verdict(a[:n], b[:n], 0.01), n
        n += plan.repeats


# The run budgets of the simulated `--repeats auto` sweeps of two trials of one profile: `max_runs:
# 10` (5 runs each: looks at 3 and 5) and the default, three times the first pass (18 runs: looks
# at 3, 5, 7 and 9), each as farm/study/repeats.py `auto_design` plans it.
BUDGET_5 = 10
BUDGET_DEFAULT = None


def simulate_row(diff: float, cv: float, pairs: int, rng) -> dict:
    from farm.study.repeats import auto_design

    looks5 = auto_design([FIRST, FIRST], 2 * FIRST, BUDGET_5)[1]
    looks_default = auto_design([FIRST, FIRST], 2 * FIRST, BUDGET_DEFAULT)[1]
    most_default = FIRST + 2 * (looks_default - 1)
    sd = math.sqrt(math.log1p(cv * cv))
    out = {"fixed3": {}, "fixed5": {}, "auto": {}, "auto_default5": {}, "auto_default": {}, "old": {}}
    runs = {"auto": 0, "auto_default": 0}
    for _ in range(pairs):
        a = rng.lognormal(math.log(1000), sd, max(LONGER, most_default))
        b = rng.lognormal(math.log(1000 * (1 + diff)), sd, max(LONGER, most_default))
        got = {"fixed3": _verdict(a[:FIRST], b[:FIRST], 0.05), "fixed5": _verdict(a[:MOST], b[:MOST], 0.05),
               "old": _old_auto(a, b)[0]}
        got["auto"], n = _auto(a, b, looks5, MOST)
        runs["auto"] += n
        got["auto_default5"] = _auto(a, b, looks_default, MOST)[0]
        got["auto_default"], n = _auto(a, b, looks_default, most_default)
        runs["auto_default"] += n
        for key, g in got.items():
            out[key][g] = out[key].get(g, 0) + 1
    out["auto_runs"] = runs["auto"] / pairs
    out["auto_default_runs"] = runs["auto_default"] / pairs
    out["looks"] = (looks5, looks_default, most_default)
    return out


def simulated(pairs: int, seed: int) -> None:
    from farm.study.repeats import auto_looks, look_alphas

    rng = np.random.default_rng(seed)
    rows = [(0.05, cv) for cv in (0.01, 0.02, 0.03, 0.05)] + [(d, 0.02) for d in (0.0, 0.03, 0.10)]
    print(f"Simulated: {pairs} pairs a row, lognormal throughput, farm's decision code "
          f"(margin ±3 %; 'right' = better for the faster one, 'wrong' = a decision the wrong way or a difference "
          f"between identical ones). `--repeats auto` levels (O'Brien-Fleming-type spending of 0.05): budget of 5 runs "
          f"each (max_runs {BUDGET_5}), looks at {auto_looks(2)}: {look_alphas(auto_looks(2))}; default budget "
          f"(18 runs), looks at {auto_looks(4)}: {look_alphas(auto_looks(4))}")
    print()
    head = ["difference", "CV", "repeats: 3 (α 0.05) right", "repeats: 5 (α 0.05) right",
            "auto, budget 5 each: right", "equivalent", "undecided", "wrong", "mean runs each",
            "auto, default budget: right within 5 runs each", "right within 9 runs each", "wrong",
            "mean runs each", "old auto (α 0.01 a look), ≤ 5 each: right"]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for diff, cv in rows:
        r = simulate_row(diff, cv, pairs, rng)

        def share(key, what):
            return f"{r[key].get(what, 0) / pairs:.1%}"

        right = "equivalent" if diff == 0 else "right"
        print(f"| {diff:.0%} | {cv:.0%} | {share('fixed3', right)} | {share('fixed5', right)} | {share('auto', right)} | "
              f"{share('auto', 'equivalent')} | {share('auto', 'undecided')} | {share('auto', 'wrong')} | "
              f"{r['auto_runs']:.2f} | {share('auto_default5', right)} | {share('auto_default', right)} | "
              f"{share('auto_default', 'wrong')} | {r['auto_default_runs']:.2f} | {share('old', right)} |")
    print()
    print("(difference 0 %: 'right' is `equivalent`, and 'wrong' is a false positive.)")


# ---------------------------------------------------------------------------------------------
# measured


def measure(args) -> Path:
    import aa

    study = aa.build_study(args)
    flags = {"a": aa.jitter_flags(args), "b": {**aa.jitter_flags(args), "itl-ms": args.itl_ms_b,
                                               "ttft-ms": args.ttft_ms_b if args.ttft_ms_b is not None else args.ttft_ms}}
    path = Path(args.runs_file or tempfile.mktemp(suffix=".jsonl", prefix="power-runs-"))
    done = {json.loads(x)["batch"] for x in path.read_text().splitlines() if x.strip()} if path.exists() else set()
    batches = math.ceil(args.measure / args.per_batch)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        for b in range(batches):
            if b in done:
                continue
            batch = aa.run_batch(b, study, args, Path(args.workdir or tmp), flags=flags, tag="pw")
            with path.open("a") as f:
                f.write(json.dumps(batch) + "\n")
            print(f"batch {b + 1}/{batches}: {[batch['trials'][s]['status'] for s in 'ab']} "
                  f"[{time.monotonic() - started:.0f} s]", flush=True)
    return path


def analyze(path: Path, args) -> None:
    import aa

    batches = aa.read_batches(path)
    rows = []
    for batch in batches:
        for _, pair in aa.comparisons_of(batch, args.per_batch):
            got = aa.judge(pair, args)
            if not got["valid"]:
                continue
            tps = {s: [r.metrics.total_tps for r in pair[s].runs] for s in "ab"}
            b_id = pair["b"].trial.id
            got["ratio"] = float(np.exp(np.mean(np.log(tps["b"])) - np.mean(np.log(tps["a"]))))
            for key in ("fixed3", "fixed5", "auto", "auto_default"):
                j = got[key]
                faster_leads = j["leader"] == b_id
                j["outcome"] = ("right" if j["decision"] == "better" and faster_leads else
                                "wrong" if j["decision"] in ("better", "worse") else j["decision"])
            rows.append(got)
    n = len(rows)
    cvs = sorted(c for r in rows for c in r["cv"].values())
    ratios = sorted(r["ratio"] for r in rows)
    fa, fb = batches[0]["flags"], batches[0].get("flags_b", batches[0]["flags"])
    differs = " ".join(f"--{k}={fb[k]:g}" for k in fb if fb[k] != fa.get(k)) or "the same flags"
    print(f"Measured: {n} comparisons of mock-server {' '.join(f'--{k}={v:g}' for k, v in fa.items())} against "
          f"{differs} ({args.requests} requests of {args.output_tokens} output tokens at concurrency "
          f"{args.concurrency}; 5 runs a side each, from {len(batches)} batches); ratio of the geometric means over "
          f"5 runs: median "
          f"{ratios[n // 2]:.3f}; same-configuration CV over 5 runs: median {cvs[len(cvs) // 2]:.2%} "
          f"(10-90 %: {cvs[len(cvs) // 10]:.2%} - {cvs[9 * len(cvs) // 10]:.2%})")
    print()
    head = ["judged as", "right (the faster one better)", "95 % CI", "equivalent", "undecided", "wrong"]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for key, label in (("fixed3", "repeats: 3 (α 0.05)"), ("fixed5", "repeats: 5 (α 0.05)"),
                       ("auto", f"repeats: auto, max_runs {aa.AUTO_BUDGET} (≤ 5 runs each)"),
                       ("auto_default", "repeats: auto, default budget, its first 2 looks (≤ 5 runs each)")):
        k = sum(r[key]["outcome"] == "right" for r in rows)
        lo, hi = aa.clopper_pearson(k, n)

        def share(what):
            return f"{sum(r[key]['outcome'] == what for r in rows) / n:.1%}"

        print(f"| {label} | {k} of {n} = {k / n:.1%} | {lo:.1%} - {hi:.1%} | {share('equivalent')} | "
              f"{share('undecided')} | {share('wrong')} |")
    if args.check_pairs:
        # The simulation at the difference and CV these runs had: does farm decide real runs as
        # often as lognormal ones of the same spread?
        diff, cv = ratios[n // 2] - 1, cvs[len(cvs) // 2]
        r = simulate_row(diff, cv, args.check_pairs, np.random.default_rng(args.seed))
        shares = {key: r[key].get("right", 0) / args.check_pairs
                  for key in ("fixed3", "fixed5", "auto", "auto_default5")}
        print()
        print(f"Simulated at the measured median ratio and CV ({diff:+.1%} at {cv:.2%}, {args.check_pairs} pairs): "
              f"right with repeats 3 {shares['fixed3']:.1%}, repeats 5 {shares['fixed5']:.1%}, auto max_runs "
              f"{aa.AUTO_BUDGET} {shares['auto']:.1%}, auto default budget's first 2 looks {shares['auto_default5']:.1%}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--simulate", type=int, default=4000, help="simulated pairs a row (0: none)")
    ap.add_argument("--seed", type=int, default=45)
    ap.add_argument("--measure", type=int, default=0, help="measured comparisons (real mock runs; 0: none)")
    ap.add_argument("--per-batch", type=int, default=5, help="comparisons per pair of servers (default 5)")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--ttft-ms", type=float, default=40)
    ap.add_argument("--ttft-ms-std", type=float, default=0)
    ap.add_argument("--itl-ms", type=float, default=8)
    ap.add_argument("--itl-ms-std", type=float, default=0)
    ap.add_argument("--itl-ms-b", type=float, default=7.5, help="the faster configuration's inter-token latency")
    ap.add_argument("--ttft-ms-b", type=float, default=None, help="the faster configuration's time to first token "
                    "(default: --ttft-ms)")
    ap.add_argument("--runs-file", default=None)
    ap.add_argument("--analyze", default=None, help="judge the batches of this runs file; measure nothing")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--check-pairs", type=int, default=2000, help="with --analyze or --measure: simulated pairs at the "
                    "measured ratio and CV, printed beside the measured table (0: none)")
    args = ap.parse_args()
    if args.simulate:
        simulated(args.simulate, args.seed)
        print()
    if args.analyze:
        analyze(Path(args.analyze), args)
    elif args.measure:
        analyze(measure(args), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
