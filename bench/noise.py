"""Where the GPU's run-to-run noise comes from: each source's size and its share, from committed runs.

Issue "Decisive answers" asks for the sources of the deciding profile's noise (CV up to 16 % on the
H200's `sharegpt_synthetic`) before anything is built against them. This script reads the runs farm
committed (results files: `farm report ID --out DIR` writes them) and estimates, on the log scale
that throughput ratios live on:

- **first run after an engine start** (no warm-up): the H200's pass 2 ran two runs of each
  configuration right after one start; the H100's search five. Effect = the first run against the
  mean of the later ones of the same start, by start time (the `repeat` numbers are shuffled).
- **run to run, warm** (same start, the first run left out): the later runs' pooled SD within
  each start, and the H200's `throughput` profile (256 warm-up requests, one machine).
- **machine**: a configuration's H200 pass-1 run (its own machine) against its pass-2 warm run
  (another machine), with the warm run-to-run part taken out: var(d) = 2 sd_machine^2 + 2 sd_warm^2.
- **drain at a run's end**: not in these files (their per-request timings were slimmed away
  before `steady_tps` existed); said as not measured.

Then what a study that pools runs the way the H200's study did (per configuration: one run on one
machine, two after a fresh start on another, the first of them cold) should see as its
same-configuration CV from these parts, against the CV it did see. Every number comes from the
files named on the command line; nothing is assumed but the variance algebra in `pooled_share`.

    python bench/noise.py                       # bench/h200/results.json + bench/h100/from-seed/results.json
    python bench/noise.py --h200 FILE --h100 FILE
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRIMARY = "sharegpt_synthetic"


def load(path: Path) -> list[dict]:
    return [r for r in json.loads(path.read_text())["runs"]
            if r.get("status") == "ok" and "total_tps" in r.get("metrics", {})]


START_GAP_S = 600


def starts(runs: list[dict], profile_prefix: str) -> dict[tuple[str, int], list[dict]]:
    """Runs of one engine start, in the order they ran: (trial, k-th start). The older results
    files do not record every run's start (the H200's pass 2 left `engine_start_pass` unset for
    some trials, and its machines were all named `vm`), so a start is told by time: a trial's
    runs of the profile less than START_GAP_S apart (a run lasts 20-130 s; a trial's next start
    came on another day or after a whole pass of other trials)."""
    by_trial: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        if r["profile"].startswith(profile_prefix):
            by_trial[r["name"]].append(r)
    out: dict[tuple[str, int], list[dict]] = {}
    for name, rs in by_trial.items():
        rs.sort(key=lambda r: r["provenance"]["started_at"])
        k, last = 0, None
        for r in rs:
            t = datetime.fromisoformat(r["provenance"]["started_at"])
            if last is not None and (t - last).total_seconds() > START_GAP_S:
                k += 1
            out.setdefault((name, k), []).append(r)
            last = t
    return out


def log_tps(r: dict) -> float:
    return math.log(r["metrics"]["total_tps"])


def pct(x: float) -> str:
    return f"{(math.exp(x) - 1) * 100:+.1f} %"


def sd_pct(s: float) -> str:
    return f"{s * 100:.1f} %"


def first_run_effects(groups: dict) -> list[tuple[str, float, float]]:
    """(trial, log(first / mean of the later runs), first's mean TTFT / the later runs')."""
    out = []
    for (name, _), rs in groups.items():
        if len(rs) < 2:
            continue
        later = rs[1:]
        d = log_tps(rs[0]) - statistics.fmean(log_tps(r) for r in later)
        ttft = rs[0]["metrics"]["ttft_mean_ms"] / statistics.fmean(r["metrics"]["ttft_mean_ms"] for r in later)
        out.append((name, d, ttft))
    return out


def pooled_sd(samples: list[list[float]]) -> tuple[float, int]:
    """Pooled within-group SD of log values and its degrees of freedom."""
    ss = sum(sum((x - statistics.fmean(s)) ** 2 for x in s) for s in samples if len(s) > 1)
    df = sum(len(s) - 1 for s in samples if len(s) > 1)
    return (math.sqrt(ss / df) if df else float("nan")), df


def pooled_share(first_mean: float, first_sd: float, machine_sd: float, warm_sd: float) -> dict[str, float]:
    """Expected sample variance, by source, of one configuration's 3 runs pooled as the H200's study
    pooled them: x1 = m_A + e1 (pass 1, its own machine, warm), x2 = m_B + f + e2 (the first run
    after a start on machine B, no warm-up), x3 = m_B + e3. With machine effects m of variance
    sd_machine^2, a first-run shift f of mean first_mean and variance first_sd^2, warm noise e of
    variance sd_warm^2, E[s^2] = (1/2) E[sum (x - mean)^2] adds up as:
      machine:   (m_A, m_B, m_B) gives (2/3)(m_A - m_B)^2, expectation (4/3) sd_machine^2, halved;
      first run: (0, f, 0) gives (2/3) f^2, expectation (2/3)(first_mean^2 + first_sd^2), halved;
      warm:      sd_warm^2 (each run its own)."""
    return {
        "first run after a start": (first_mean ** 2 + first_sd ** 2) / 3,
        "machine": machine_sd ** 2 * 2 / 3,
        "run to run, warm": warm_sd ** 2,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--h200", default=str(REPO / "bench/h200/results.json"))
    ap.add_argument("--h100", default=str(REPO / "bench/h100/from-seed/results.json"))
    a = ap.parse_args()
    h200, h100 = load(Path(a.h200)), load(Path(a.h100))

    # First run after a start: the H200's pass-2 starts (2 runs each) and the H100's (5 each).
    h200_starts = starts(h200, PRIMARY)
    h200_first = first_run_effects(h200_starts)
    # The H100's starts before farm's default warm-up (its first sitting) and after it (its runs
    # record the warm-up's seconds); the H200's primary profile had none (the study's own words).
    h100_all = starts(h100, PRIMARY)
    h100_starts = {k: v for k, v in h100_all.items() if v[0]["provenance"].get("warmup_s") is None}
    h100_warmed = {k: v for k, v in h100_all.items() if v[0]["provenance"].get("warmup_s") is not None}
    h100_first = first_run_effects(h100_starts)
    warmed_first = first_run_effects(h100_warmed)
    firsts = [d for _, d, _ in h200_first + h100_first]
    first_mean = statistics.fmean(firsts)
    slower_ttft = sum(1 for _, d, t in h200_first + h100_first if d < 0 and t > 1.5)

    # Warm run to run: the H100's later runs within a start; the H200's throughput profile.
    warm_h100, df_h100 = pooled_sd([[log_tps(r) for r in rs[1:]] for rs in h100_all.values()])
    warmed_sd, warmed_df = pooled_sd([[log_tps(r) for r in rs] for rs in h100_warmed.values()])
    thr: dict[str, list[float]] = defaultdict(list)
    for r in h200:
        if r["profile"] == "throughput":
            thr[r["name"]].append(log_tps(r))
    warm_thr, df_thr = pooled_sd(list(thr.values()))
    # An estimated first-run effect (first - mean of k later runs) carries warm noise of variance
    # sd_warm^2 (1 + 1/k) besides the effect's own spread: taken out.
    noise = statistics.fmean(1 + 1 / (len(rs) - 1) for rs in list(h200_starts.values()) + list(h100_starts.values())
                             if len(rs) > 1) * warm_h100 ** 2
    first_sd = math.sqrt(max(statistics.variance(firsts) - noise, 0.0))

    # Machine: a configuration's pass-1 run against its pass-2 warm (second) run.
    by_name: dict[str, dict[int, list[dict]]] = defaultdict(dict)
    for (name, _), rs in h200_starts.items():
        by_name[name][min(len(rs), 2)] = rs     # 1: the pass-1 start (one run), 2: pass 2's (two)
    diffs = [log_tps(p[1][0]) - log_tps(p[2][-1]) for p in by_name.values() if 1 in p and 2 in p]
    var_d = statistics.variance(diffs)
    machine_sd = math.sqrt(max(var_d / 2 - warm_h100 ** 2, 0.0))

    # What the study's pooled 3-run samples saw, against what the parts predict.
    seen = []
    for p in by_name.values():
        xs = [log_tps(r) for rs in p.values() for r in rs]
        if len(xs) >= 3:
            seen.append(statistics.variance(xs))
    parts = pooled_share(first_mean, first_sd, machine_sd, warm_h100)
    total = sum(parts.values())

    print("Sources of run-to-run noise on the deciding profile (sharegpt_synthetic, total tok/s, log scale)\n")
    print("| source | data | n | effect / SD | predicted share of a pooled 3-run sample's variance |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| first run after an engine start, no warm-up | H200 pass 2 (2 runs a start), H100 search (5 a start), "
          f"first against the later runs of its start | {len(firsts)} starts | mean {pct(first_mean)}, "
          f"SD {sd_pct(first_sd)}; {slower_ttft} of {len(firsts)} slower with over 1.5x the later runs' mean TTFT | "
          f"{parts['first run after a start'] / total * 100:.0f} % |")
    if warmed_first:
        print(f"| first run after an engine start and farm's default warm-up (one unrecorded round at the "
              f"profile's concurrency) | H100 search, second sitting | {len(warmed_first)} starts | "
              + ", ".join(f"{pct(d)} (TTFT x{t:.2f})" for _, d, t in warmed_first)
              + f"; all runs of these starts: SD {sd_pct(warmed_sd)} ({warmed_df} df) | (the default since) |")
    print(f"| machine (another lent machine, another day) | H200: a configuration's pass-1 run against its pass-2 warm run, "
          f"less the warm part | {len(diffs)} configurations | SD {sd_pct(machine_sd)} (SD of the differences "
          f"{sd_pct(math.sqrt(var_d))}, mean {pct(statistics.fmean(diffs))}) | {parts['machine'] / total * 100:.0f} % |")
    print(f"| run to run, warm, same start | H100: runs 2-5 of each start (with and without the warm-up) | {df_h100} df | SD {sd_pct(warm_h100)} | "
          f"{parts['run to run, warm'] / total * 100:.0f} % |")
    print(f"| run to run, warm-up of 256 requests, one machine | H200 `throughput` profile | {df_thr} df | "
          f"SD {sd_pct(warm_thr)} | (another profile: for scale) |")
    print("| drain at a run's end | not in these files: per-request timings were slimmed before steady_tps existed | "
          "- | not measured | - |")
    print()
    print(f"Predicted SD of a pooled 3-run sample: {sd_pct(math.sqrt(total))}; seen in the H200 study, "
          f"root mean square over {len(seen)} configurations: {sd_pct(math.sqrt(statistics.fmean(seen)))} "
          f"(median {sd_pct(math.sqrt(statistics.median(seen)))}, range {sd_pct(math.sqrt(min(seen)))} - "
          f"{sd_pct(math.sqrt(max(seen)))}).")
    print("\nFirst run after each start (trial, effect, first run's mean TTFT / the later runs'):")
    for name, d, t in h200_first + h100_first + warmed_first:
        print(f"  {name[:60]:60s} {pct(d):>9s}  TTFT x{t:.2f}")


if __name__ == "__main__":
    main()
