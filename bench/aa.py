"""A/A check: how often does farm declare a winner between two identical configurations?

Each comparison runs the same mock configuration, with latency jitter (`--ttft-ms-std`,
`--itl-ms-std`), as two trials: two engine servers (guidellm mock-server) started side by side,
each benchmarked `--repeats` times by real guidellm through farm's `TrialRunner` (the code a
sweep's Ray actor runs: cache reset, seeded order of runs, the guidellm client process, the
report parser). The two results then go through farm's own selection (`records_from_trials` ->
`select`), exactly as a sweep's report would, and the comparison counts as a false winner when
the verdict is `winner`. Comparisons are independent: fresh engines, disjoint runs.

Two identical configurations differ only by noise, so at the 95 % level farm must declare a
winner in at most 5 % of the comparisons. The script prints the count, the rate and its own
Clopper-Pearson interval. It is a benchmark, not a test.

    python bench/aa.py                       # default: 30 comparisons x 2 trials x 3 repeats
    python bench/aa.py --comparisons 10      # a quick look

Each comparison costs two engine starts and six guidellm client runs, run two at a time: about
25 s on 2 idle cores (the estimate behind the default's ~12 min), 50 s at a load average of 5,
and 100 s at 20 (measured: 40 comparisons took 44 min on 2 cores shared with other test suites).
    python bench/aa.py --json aa.json        # also write every comparison's numbers
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("GUIDELLM__MAX_WORKER_PROCESSES", "2")


def build_study(args):
    from farm.study.spec import DataSpec, EngineSpec, GridBlock, GridSpec, ModelSpec, ProfileSpec, Study

    profile = ProfileSpec(data=DataSpec(kind="synthetic", prompt_tokens=32, output_tokens=args.output_tokens),
                          requests=args.requests, rate=1000, max_concurrency=args.concurrency, seed=42,
                          max_seconds=120, description="A/A: short saturating chat")
    return Study(name="aa", models={"tiny": ModelSpec(name="farm-tiny", tokenizer="farm:tiny")},
                 engines={"mock": EngineSpec(ready_timeout_s=60)}, profiles={"aa": profile},
                 grids={"aa": GridSpec(blocks=[GridBlock(engine="mock", models=["tiny"])])},
                 primary_profile="aa", repeats=args.repeats)


def jitter_flags(args) -> dict:
    return {"ttft-ms": args.ttft_ms, "ttft-ms-std": args.ttft_ms_std, "itl-ms": args.itl_ms,
            "itl-ms-std": args.itl_ms_std}


def one_comparison(i: int, study, args, workdir: Path) -> dict:
    """Two trials of the same configuration, side by side; farm's verdict on them."""
    from actors.bench import TrialJob, TrialRunner
    from farm.analysis.records import records_from_trials
    from farm.analysis.select import select, settings_for
    from farm.study.trial import Trial

    class Runner(TrialRunner):
        def _version(self):  # `guidellm --version` costs seconds per trial and says nothing about noise
            return None

    trials = [Trial(id=f"mock-aa{i:03d}{side}", name=f"{side.upper()}{i}", engine="mock", model_key="tiny",
                    model="farm-tiny", tokenizer="farm:tiny", flags=jitter_flags(args), profiles=["aa"], index=k)
              for k, side in enumerate("ab")]
    results: dict[str, object] = {}

    def run(trial):
        job = TrialJob(sweep_id=f"aa{i:03d}", trial=trial, engine_spec=study.engines["mock"],
                       profiles={"aa": study.profiles["aa"]}, repeats=args.repeats, min_success_rate=0.99,
                       workdir=str(workdir), order_seed=i)
        results[trial.id] = Runner(job).run()

    threads = [threading.Thread(target=run, args=(t,)) for t in trials]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    trs = [results[t.id] for t in trials]
    records = records_from_trials(trs, study, grid="aa", sweep_id=f"aa{i:03d}")
    sel = select(records, settings_for(records, study, grid="aa"))
    v = sel.verdict()
    tps = {t.name or t.id: t.stats["total_tps"].mean for t in sel.trials if "total_tps" in t.stats}
    lead = v.comparisons[0] if v and v.comparisons else None
    return {"comparison": i, "decision": v.decision if v else "none", "statuses": [tr.status.value for tr in trs],
            "total_tps": tps, "relative_pct": lead.relative_pct if lead else None,
            "ci_pct": [lead.ci_low_pct, lead.ci_high_pct] if lead else None, "p": lead.p_holm if lead else None}


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    from scipy.stats import beta

    a = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--comparisons", type=int, default=30, help="independent A/A comparisons (default 30)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per trial (default 3, as a sweep would use)")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--ttft-ms", type=float, default=40)
    ap.add_argument("--ttft-ms-std", type=float, default=20)
    ap.add_argument("--itl-ms", type=float, default=8)
    ap.add_argument("--itl-ms-std", type=float, default=4)
    ap.add_argument("--workdir", default=None, help="where engine logs and guidellm reports go (default: a temp dir)")
    ap.add_argument("--json", default=None, help="also write every comparison to this file")
    args = ap.parse_args()

    study = build_study(args)
    flags = " ".join(f"--{k}={v:g}" for k, v in jitter_flags(args).items())
    print(f"A/A: {args.comparisons} comparisons of two trials of `mock-server {flags}`, {args.repeats} runs each, "
          f"{args.requests} requests per run; farm's selection at alpha 0.05")
    rows, started = [], time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        for i in range(args.comparisons):
            row = one_comparison(i, study, args, workdir)
            rows.append(row)
            ci = row["ci_pct"]
            interval = f"[{ci[0]:+.2f}, {ci[1]:+.2f}] %" if ci and ci[0] is not None else "n/a"
            if row["decision"] not in ("winner", "tie"):
                print(f"  {i + 1:3d}/{args.comparisons}  not counted: trial statuses {row['statuses']}", flush=True)
                continue
            print(f"  {i + 1:3d}/{args.comparisons}  {row['decision']:<12} "
                  f"lead {row['relative_pct'] if row['relative_pct'] is not None else float('nan'):+6.2f} % {interval:<20} "
                  f"p = {row['p'] if row['p'] is not None else float('nan'):.3f}  "
                  f"[{time.monotonic() - started:5.0f} s]", flush=True)
    valid = [r for r in rows if r["decision"] in ("winner", "tie")]
    winners = sum(r["decision"] == "winner" for r in valid)
    n = len(valid)
    lo, hi = clopper_pearson(winners, n) if n else (float("nan"), float("nan"))
    print()
    print(f"{'A/A comparisons':<34}{n} (of {len(rows)}; the others had a failed run)")
    print(f"{'farm declared a winner':<34}{winners}")
    print(f"{'false-winner rate':<34}{winners / n if n else float('nan'):.1%}  (95 % CI {lo:.1%} to {hi:.1%}, "
          f"Clopper-Pearson; nominal 5 %)")
    print(f"{'wall time':<34}{time.monotonic() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "comparisons": rows, "winners": winners, "n": n,
                                               "rate": winners / n if n else None, "ci": [lo, hi]}, indent=1))
    return 0 if n and winners / n <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
