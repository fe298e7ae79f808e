"""A/A check: how often does farm call two identical configurations different, and how often equal?

What runs
---------
Two trials of the same mock configuration (`guidellm mock-server` with latency jitter,
`--ttft-ms-std`, `--itl-ms-std`), each through farm's own `TrialRunner` (the code a sweep's Ray
actor runs: engine start and readiness, warm-up, cache reset, the guidellm client process, the
report parser, the run's judging), benchmarked by real guidellm.

To make 500+ comparisons affordable on 2 shared cores, the runs of several comparisons come from
one *batch*: one long-lived pair of mock servers (A and B), each serving `comparisons_per_batch x
runs` runs. Nothing is faked:

- the runs are real and disjoint: every run belongs to exactly one comparison;
- one run at a time (one guidellm client and one server busy: never more than 2 processes), in a
  seeded random interleaving of A's and B's runs, so that drift and other work on the machine
  fall on both sides alike instead of on one block of runs;
- each comparison takes a seeded random subset of A's runs and one of B's (its `runs` each),
  spread over the batch, never its neighbours only.

What a batch shares, and a sweep's trials would not, is an engine start per side: a comparison
of a batch is therefore not independent of the batch's other comparisons (a start that happened
to be slower would push them all the same way). The table says so with a second interval, a
bootstrap over batches, beside Clopper-Pearson's (which assumes independent comparisons).

What is judged
--------------
Each comparison goes through farm's selection (`records_from_trials` -> `select`) three ways:

- `fixed 3`: the first 3 runs of each side, a study with `repeats: 3` (alpha 0.05);
- `fixed 5`: all 5 runs of each side, `repeats: 5` (alpha 0.05);
- `auto`: what `--repeats auto` with `max_runs: 10` (5 runs each at most) does with the same
  runs: its first pass (3 each), then the pass plan (`farm.analysis.plan.pass_from_stored`) says
  whether to run 2 more each, each look judged at its level from the alpha-spending rule
  (farm/study/repeats.py: 0.0113 at 3 runs, 0.0456 at 5);
- `auto_default`: the same with the default budget (18 runs: looks planned at 3, 5, 7 and 9 runs
  each), stopped after its second look (the runs of a comparison end at 5): its levels there are
  stricter (0.000686, 0.00828), as a plan of four looks spends less at its first two.

A false positive is a decision `better`/`worse` between the two (identical) trials; `equivalent`
is the study's margin (3 %) proven; `undecided` is neither.

    python bench/aa.py --batches 100 --runs-file /tmp/aa-runs.jsonl   # measure (resumable) and judge
    python bench/aa.py --analyze /tmp/aa-runs.jsonl                   # judge stored runs again

The measured runs are kept (`--runs-file`, one JSON line per batch: both trials' results as farm
records them), so the judging can be recomputed from them (`--analyze` with the profile options the
runs were measured with: a run's success rate is over the profile's requests). It is a benchmark,
not a test. Each batch costs two engine starts and `2 x per_batch x 5` runs one at a time: about
100 s for a batch of 5 comparisons on 2 cores shared with other work (20 s a comparison, 5 runs a
side where the old design ran 3, at a quarter of the engine starts).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", "2")

RUNS = 5          # runs per side per comparison (the `fixed 3` and `auto` judgements use the first 3 first)
FIRST = 3
AUTO_BUDGET = 2 * RUNS  # `--repeats auto` with `max_runs: 10`: 5 runs each at most (looks at 3 and 5)


def build_study(args, repeats: int | str = RUNS):
    from farm.study.spec import DataSpec, EngineSpec, GridBlock, GridSpec, ModelSpec, ProfileSpec, Study

    profile = ProfileSpec(data=DataSpec(kind="synthetic", prompt_tokens=32, output_tokens=args.output_tokens),
                          requests=args.requests, rate=1000, max_concurrency=args.concurrency, seed=42,
                          max_seconds=120, warmup_requests=args.warmup, description="A/A: short saturating chat")
    return Study(name="aa", models={"tiny": ModelSpec(name="farm-tiny", tokenizer="farm:tiny")},
                 engines={"mock": EngineSpec(ready_timeout_s=60)}, profiles={"aa": profile},
                 grids={"aa": GridSpec(blocks=[GridBlock(engine="mock", models=["tiny"])])},
                 primary_profile="aa", repeats=repeats)


def jitter_flags(args) -> dict:
    return {"ttft-ms": args.ttft_ms, "ttft-ms-std": args.ttft_ms_std, "itl-ms": args.itl_ms,
            "itl-ms-std": args.itl_ms_std}


# ---------------------------------------------------------------------------------------------
# measuring: one batch = one pair of servers, runs interleaved one at a time


class Turns:
    """Whose run is next: a seeded sequence of sides; a side that ended (its engine failed) is skipped."""

    def __init__(self, order: list[str]) -> None:
        self.order, self.at, self.ended = order, 0, set()
        self.cond = threading.Condition()

    def _skip(self) -> None:
        while self.at < len(self.order) and self.order[self.at] in self.ended:
            self.at += 1

    def wait(self, side: str) -> None:
        with self.cond:
            self._skip()
            while self.at < len(self.order) and self.order[self.at] != side:
                self.cond.wait(1.0)
                self._skip()

    def done(self, side: str, *, ended: bool = False) -> None:
        with self.cond:
            if ended:
                self.ended.add(side)
            elif self.at < len(self.order) and self.order[self.at] == side:
                self.at += 1
            self._skip()
            self.cond.notify_all()


def run_batch(b: int, study, args, workdir: Path, flags: dict[str, dict] | None = None, tag: str = "aa") -> dict:
    """One pair of servers (`flags` per side, default the same jitter flags for both), `per_batch x
    RUNS` runs each, one run at a time in a seeded random order."""
    from actors.bench import TrialJob, TrialRunner
    from farm.study.trial import Trial

    flags = flags or {s: jitter_flags(args) for s in "ab"}
    per_side = args.per_batch * RUNS
    order = ["a"] * per_side + ["b"] * per_side
    random.Random(f"aa-order:{b}").shuffle(order)
    turns = Turns(order)

    class Runner(TrialRunner):
        side = ""

        def _version(self, env):  # `guidellm --version` costs seconds per trial and says nothing about noise
            return None

        def _run_profile(self, *a, **kw):
            turns.wait(self.side)
            try:
                return super()._run_profile(*a, **kw)
            finally:
                turns.done(self.side)

    trials = [Trial(id=f"mock-{tag}{b:03d}{side}", name=f"{side.upper()}{b}", engine="mock", model_key="tiny",
                    model="farm-tiny", tokenizer="farm:tiny", flags=flags[side], profiles=["aa"], index=k)
              for k, side in enumerate("ab")]
    results: dict[str, object] = {}

    def run(trial, side):
        job = TrialJob(sweep_id=f"{tag}{b:03d}", trial=trial, engine_spec=study.engines["mock"],
                       profiles={"aa": study.profiles["aa"]}, repeats=per_side, min_success_rate=0.99,
                       workdir=str(workdir), order_seed=b)
        runner = Runner(job)
        runner.side = side
        try:
            results[side] = runner.run()
        finally:
            turns.done(side, ended=True)

    threads = [threading.Thread(target=run, args=(t, s)) for t, s in zip(trials, "ab")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"batch": b, "order": order, "flags": flags["a"], **({"flags_b": flags["b"]} if flags["b"] != flags["a"] else {}),
            "trials": {s: json.loads(results[s].model_dump_json()) for s in "ab"}}


# ---------------------------------------------------------------------------------------------
# judging: farm's selection on each comparison's runs


def comparisons_of(batch: dict, per_batch: int) -> list[tuple[int, dict]]:
    """Each comparison's runs: per side a seeded random subset of `RUNS` of the batch's runs, in time order."""
    from farm.analysis.results import TrialResult

    out = []
    sides = {s: TrialResult.model_validate(batch["trials"][s]) for s in "ab"}
    groups = {}
    for s, tr in sides.items():
        idx = sorted(range(len(tr.runs)), key=lambda i: tr.runs[i].started_at or 0)
        random.Random(f"aa-groups:{batch['batch']}:{s}").shuffle(idx)
        groups[s] = [sorted(idx[j * RUNS:(j + 1) * RUNS], key=lambda i: tr.runs[i].started_at or 0)
                     for j in range(per_batch)]
    for j in range(per_batch):
        pair = {}
        for s, tr in sides.items():
            runs = [tr.runs[i] for i in groups[s][j]]
            cid = f"{batch['batch']:03d}-{j}"
            trial = tr.trial.model_copy(update={"id": f"aa{cid}{s}", "name": f"{s.upper()}{cid}"})
            pair[s] = tr.model_copy(update={"trial": trial, "runs": runs})
        out.append((j, pair))
    return out


def _subset(tr, n: int, pass_two: bool = False):
    runs = [r.model_copy(update={"repeat": i, "pass_index": 2 if pass_two and i >= FIRST else 1})
            for i, r in enumerate(tr.runs[:n])]
    return tr.model_copy(update={"runs": runs})


def judge(pair: dict, args) -> dict:
    """farm's decision on one comparison: fixed 3, fixed 5 and `--repeats auto`, as a sweep's report gives it."""
    from farm.analysis.plan import pass_from_stored
    from farm.analysis.records import records_from_trials
    from farm.analysis.select import select, settings_for

    out = {}
    if any(len(pair[s].runs) < RUNS or any(r.status.value != "ok" for r in pair[s].runs) for s in "ab"):
        return {"valid": False, "statuses": {s: [r.status.value for r in pair[s].runs] for s in "ab"}}

    def decide(trials, study) -> dict:
        records = records_from_trials(trials, study, grid="aa", sweep_id="aa")
        sel = select(records, settings_for(records, study, grid="aa"))
        v = sel.verdict()
        c = v.comparisons[0]
        return {"decision": c.decision, "verdict": v.decision, "leader": v.leader, "relative_pct": c.relative_pct,
                "ci_pct": [c.ci_low_pct, c.ci_high_pct], "p": c.p_holm, "more_runs": c.more_runs,
                "n": [c.n_a, c.n_b]}

    out["fixed3"] = decide([_subset(pair[s], FIRST) for s in "ab"], build_study(args, FIRST))
    out["fixed5"] = decide([_subset(pair[s], RUNS) for s in "ab"], build_study(args, RUNS))
    first = [_subset(pair[s], FIRST) for s in "ab"]
    for key, budget in (("auto", AUTO_BUDGET), ("auto_default", None)):
        auto = build_study(args, "auto").model_copy(update={"max_runs": budget})
        plan = pass_from_stored(first, auto, "aa", "aa")
        if plan.done:
            out[key] = {**decide(first, auto), "passes": 1, "plan": plan.reason}
        else:
            out[key] = {**decide([_subset(pair[s], RUNS, pass_two=True) for s in "ab"], auto), "passes": 2,
                        "plan": plan.reason}
    cv = {}
    for s in "ab":
        v = [r.metrics.total_tps for r in pair[s].runs]
        m = sum(v) / len(v)
        cv[s] = (sum((x - m) ** 2 for x in v) / (len(v) - 1)) ** 0.5 / m
    return {"valid": True, **out, "cv": cv}


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    from scipy.stats import beta

    a = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def batch_bootstrap(flags_by_batch: list[list[bool]], confidence: float = 0.95, n: int = 4000) -> tuple[float, float]:
    """Percentile interval of the rate, resampling whole batches (their comparisons share engine starts)."""
    import numpy as np

    rng = np.random.default_rng(0)
    k = np.array([sum(f) for f in flags_by_batch], dtype=float)
    m = np.array([len(f) for f in flags_by_batch], dtype=float)
    pick = rng.integers(0, len(k), size=(n, len(k)))
    rates = k[pick].sum(axis=1) / m[pick].sum(axis=1)
    a = (1 - confidence) / 2
    return float(np.quantile(rates, a)), float(np.quantile(rates, 1 - a))


def read_batches(path: Path) -> list[dict]:
    """A runs file's batches: JSON lines, gzip-compressed when its name ends in .gz (as committed)."""
    import gzip

    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def analyze(path: Path, args) -> int:
    batches = read_batches(path)
    per_batch = args.per_batch
    rows, by_batch = [], []
    for batch in batches:
        mine = []
        for j, pair in comparisons_of(batch, per_batch):
            row = {"batch": batch["batch"], "comparison": j, **judge(pair, args)}
            rows.append(row)
            if row["valid"]:
                mine.append(row)
        by_batch.append(mine)
    valid = [r for r in rows if r["valid"]]
    n = len(valid)
    cvs = sorted(c for r in valid for c in r["cv"].values())
    print(f"A/A on the mock engine: {n} comparisons ({len(rows) - n} left out: a failed run) from {len(batches)} "
          f"batches of {per_batch}; mock-server {' '.join(f'--{k}={v:g}' for k, v in batches[0]['flags'].items())}; "
          f"same-configuration CV of total tok/s over 5 runs: median {cvs[len(cvs) // 2]:.2%} "
          f"(10-90 %: {cvs[len(cvs) // 10]:.2%} - {cvs[9 * len(cvs) // 10]:.2%})")
    print()
    head = ("judged as", "runs each", "better/worse (false positive)", "95 % CI (Clopper-Pearson)",
            "95 % CI (bootstrap over batches)", "equivalent (within ±3 %)", "undecided")
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    from farm.study.repeats import auto_design, auto_looks, look_alphas

    def levels(budget):
        looks = auto_design([FIRST, FIRST], 2 * FIRST, budget)[1]
        return ", ".join(f"{a:.3g}" for a in look_alphas(auto_looks(looks))[:2]), looks

    five, _ = levels(AUTO_BUDGET)
    default, looks = levels(None)
    for key, label in (("fixed3", "repeats: 3 (α 0.05)"), ("fixed5", "repeats: 5 (α 0.05)"),
                       ("auto", f"repeats: auto, max_runs {AUTO_BUDGET} (looks at 3 and 5 runs: α {five})"),
                       ("auto_default", f"repeats: auto, default budget: its first 2 of {looks} looks (α {default})")):
        fp = [r[key]["decision"] in ("better", "worse") for r in valid]
        eq = sum(r[key]["decision"] == "equivalent" for r in valid)
        und = sum(r[key]["decision"] == "undecided" for r in valid)
        k = sum(fp)
        lo, hi = clopper_pearson(k, n)
        blo, bhi = batch_bootstrap([[r[key]["decision"] in ("better", "worse") for r in b] for b in by_batch if b])
        runs = "3" if key == "fixed3" else "5" if key == "fixed5" else \
            f"3 or 5 (mean {sum(r[key]['n'][0] for r in valid) / n:.2f})"
        print(f"| {label} | {runs} | {k} of {n} = {k / n:.1%} | {lo:.1%} - {hi:.1%} | {blo:.1%} - {bhi:.1%} | "
              f"{eq / n:.1%} | {und / n:.1%} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    worst = max(sum(r[k]["decision"] in ("better", "worse") for r in valid) / n
                for k in ("fixed3", "fixed5", "auto", "auto_default"))
    return 0 if worst <= 0.05 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=10, help="batches to measure (default 10)")
    ap.add_argument("--per-batch", type=int, default=5, help="comparisons per batch (default 5)")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=8, help="warm-up requests after each engine start")
    ap.add_argument("--ttft-ms", type=float, default=40)
    ap.add_argument("--ttft-ms-std", type=float, default=8)
    ap.add_argument("--itl-ms", type=float, default=8)
    ap.add_argument("--itl-ms-std", type=float, default=1.6)
    ap.add_argument("--runs-file", default=None, help="JSON lines of measured batches (appended; batches already "
                    "there are not measured again)")
    ap.add_argument("--analyze", default=None, help="judge the batches of this runs file; measure nothing")
    ap.add_argument("--workdir", default=None, help="where engine logs and guidellm reports go (default: a temp dir)")
    ap.add_argument("--json", default=None, help="also write every comparison's judgement to this file")
    args = ap.parse_args()
    if args.analyze:
        return analyze(Path(args.analyze), args)

    study = build_study(args)
    path = Path(args.runs_file or tempfile.mktemp(suffix=".jsonl", prefix="aa-runs-"))
    done = {json.loads(line)["batch"] for line in path.read_text().splitlines() if line.strip()} if path.exists() else set()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        for b in range(args.batches):
            if b in done:
                continue
            batch = run_batch(b, study, args, workdir)
            with path.open("a") as f:
                f.write(json.dumps(batch) + "\n")
            statuses = {s: batch["trials"][s]["status"] for s in "ab"}
            print(f"batch {b + 1}/{args.batches}: {statuses} [{time.monotonic() - started:.0f} s]", flush=True)
    return analyze(path, args)


if __name__ == "__main__":
    sys.exit(main())
