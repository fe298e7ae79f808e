"""Run-order effects within a trial's runs: a first run unlike the rest, one run far off, a steady drift (pure).

Repeats are pooled as if they were exchangeable draws of one configuration. They were not on the
GPUs: on the lent H100 (bench/h100/README.md, sweep 315bba48...) one trial's first run after its
engine's start was 17 % below its other four (8,721 against 10,156 - 10,713 tok/s, no warm-up) and
another's fifth run 17 % below its first four (9,012 against 10,864 - 11,032, CV 0.7 %); on one
H200 six runs of one trial fell steadily, 10,928 to 10,242 tok/s over runs 3 - 6. Such a run order
is reported, never pooled silently.

Runs are judged within one engine start (a pass or rung, on one node): a later pass starts the
engine again, perhaps on another machine, and its runs are another sequence. In start order:

- `first_run`: the first run lies outside the others' prediction interval (Student's t on the
  others' mean and spread, two-sided, `ALPHA`), by at least `MIN_EFFECT`;
- `outlier`: any other run does, with the level divided among the runs it could have been
  (Bonferroni);
- `drift`: the runs (after the first where `MIN_RUNS` follow it or it stood apart; none when one run
  is far off) trend with their
  order: the least-squares slope over the run index is significant (its t test, two-sided,
  `ALPHA`; a steady fall of 6.3 % over four runs is, where a rank test of four runs never can be)
  and its size over the runs, slope x (runs - 1) against their mean, is at least `MIN_EFFECT`.

Each needs `MIN_RUNS` runs in the start (three others to estimate the spread a first run is judged
against). The findings come as the report's warnings (`ReportWarning`, codes `run_order` and
`drift`) from `order_warnings`; farm/report/checks.py adds them to the report's checks.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from itertools import groupby
from typing import Literal, Sequence

from farm.analysis.records import Results, RunRecord, deciding_value
from farm.analysis.selection.models import ReportWarning

MIN_RUNS = 4           # runs in one engine start before its order is judged
MIN_EFFECT = 0.03      # smaller order effects are below the study's equivalence margin (3 %): not worth a warning
ALPHA = 0.05          # the first run's position is known in advance; any other run's is Bonferroni-adjusted

Kind = Literal["first_run", "outlier", "drift"]
CODES = ("run_order", "drift")  # the report's warning codes: first_run and outlier are run_order


@dataclass(frozen=True)
class OrderEffect:
    """One finding on a sequence of runs (values in run order)."""

    kind: Kind
    index: int | None        # the run it concerns (0 = the first); None for a drift
    size: float              # relative: the run against the others' mean, or the drift over all the runs
    p: float                 # the test's p-value (Bonferroni-adjusted for an outlier)

    def words(self, n: int) -> str:
        pct = f"{self.size * 100:+.1f} %"
        if self.kind == "first_run":
            return f"the first run after the engine's start is {pct} against the other {n - 1} (p {self.p:.2g})"
        if self.kind == "outlier":
            return f"run {self.index + 1} of {n} is {pct} against the others (p {self.p:.2g}, adjusted for {n} runs)"
        return f"the runs drift with their order: {pct} from the first to the last (slope p {self.p:.2g})"


def _against_rest(values: Sequence[float], i: int) -> tuple[float, float] | None:
    """(relative difference, two-sided p) of run `i` against a new draw from the others' distribution."""
    from scipy import stats as _st  # seconds to import: only a trial with enough repeats pays for it

    rest = [v for j, v in enumerate(values) if j != i]
    mean, sd = statistics.fmean(rest), statistics.stdev(rest)
    if mean <= 0:
        return None
    diff = values[i] - mean
    if sd == 0:
        return (diff / mean, 0.0 if diff else 1.0)
    t = diff / (sd * (1 + 1 / len(rest)) ** 0.5)
    return diff / mean, float(2 * _st.t.sf(abs(t), len(rest) - 1))


def first_run_effect(values: Sequence[float]) -> OrderEffect | None:
    """The first run, against the others: an effect where it lies outside their spread by `MIN_EFFECT`."""
    if len(values) < MIN_RUNS:
        return None
    judged = _against_rest(values, 0)
    if judged is None:
        return None
    size, p = judged
    return OrderEffect("first_run", 0, size, p) if p < ALPHA and abs(size) >= MIN_EFFECT else None


def outliers(values: Sequence[float], skip: int = 1) -> list[OrderEffect]:
    """Runs after the first `skip` that lie outside the others' spread (Bonferroni over the runs)."""
    if len(values) < MIN_RUNS:
        return []
    out = []
    for i in range(skip, len(values)):
        judged = _against_rest(values, i)
        if judged is None:
            continue
        size, p = judged
        p_adj = min(1.0, p * len(values))
        if p_adj < ALPHA and abs(size) >= MIN_EFFECT:
            out.append(OrderEffect("outlier", i, size, p_adj))
    return out


def trend(values: Sequence[float]) -> OrderEffect | None:
    """A drift over the runs: the least-squares slope over their order, significant and large enough."""
    if len(values) < MIN_RUNS:
        return None
    from scipy import stats as _st  # seconds to import: only a trial with enough repeats pays for it

    mean = statistics.fmean(values)
    if mean <= 0 or len(set(values)) == 1:
        return None
    fit = _st.linregress(range(len(values)), values)
    size = float(fit.slope) * (len(values) - 1) / mean
    return OrderEffect("drift", None, size, float(fit.pvalue)) if fit.pvalue < ALPHA and \
        abs(size) >= MIN_EFFECT else None


def order_effects(values: Sequence[float]) -> list[OrderEffect]:
    """Everything the run order says of one engine start's runs (values in run order): a first-run
    effect, other outliers, and a drift of the runs after a first run that stood apart."""
    values = [float(v) for v in values]
    found: list[OrderEffect] = []
    first = first_run_effect(values)
    if first is not None:
        found.append(first)
    others = outliers(values, skip=1)
    found += others
    # a drift among the runs after the start's first (a run of its own kind, flagged or not, where enough
    # runs follow it), not one that a single run far off makes
    if not others:
        drift = trend(values[1:] if first is not None or len(values) > MIN_RUNS else values)
        if drift is not None:
            found.append(drift)
    return found


# --------------------------------------------------------------------------------------
# a study's runs


def _start_key(rec: RunRecord) -> tuple:
    """The engine start that served a run: its pass (or rung) and its node."""
    prov = rec.provenance
    return (prov.engine_start_pass if prov else None, rec.node, prov.machine_key if prov else None)


def _order_key(rec: RunRecord) -> tuple:
    prov = rec.provenance
    return (prov.started_at or "" if prov else "", rec.repeat)


def sequences(results: Results, metric: str | None = None) -> list[tuple[RunRecord, list[RunRecord]]]:
    """Each (trial, profile, engine start)'s measured runs in the order they ran, with its first record;
    a capacity profile's runs (loads of a search, not repeats) are left out."""
    metric = metric or results.deciding_metric
    out = []
    runs = [r for r in results.records if deciding_value(r, metric) is not None and r.load is None
            and not (results.profiles.get(r.profile) and results.profiles[r.profile].capacity)]
    by = sorted(runs, key=lambda r: (r.trial, r.profile, str(_start_key(r))))
    for _, group in groupby(by, key=lambda r: (r.trial, r.profile, _start_key(r))):
        seq = sorted(group, key=_order_key)
        out.append((seq[0], seq))
    return out


def order_warnings(results: Results, metric: str | None = None) -> list[ReportWarning]:
    """The run-order findings of every trial and profile, as the report's warnings (`run_order` for a
    first run or one run far off, `drift` for a trend), largest first within a code."""
    metric = metric or results.deciding_metric
    out: list[ReportWarning] = []
    for first, seq in sequences(results, metric):
        values = [deciding_value(r, metric) for r in seq]
        start = f" (engine start {first.provenance.engine_start_pass})" if first.provenance and \
            first.provenance.engine_start_pass and first.provenance.engine_start_pass > 1 else ""
        shown = " / ".join(f"{v:,.0f}" for v in values)
        for effect in order_effects(values):
            code = "drift" if effect.kind == "drift" else "run_order"
            out.append(ReportWarning(
                code=code, trial=first.label, profile=first.profile, size=abs(effect.size) * 100,
                message=(f"{effect.words(len(values))}; {metric} in run order{start}: {shown}: pooled as one "
                         f"sample, its mean and spread are not this configuration's alone")))
    return sorted(out, key=lambda w: (CODES.index(w.code), -(w.size or 0)))
