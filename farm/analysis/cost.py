"""Dollars and joules per million tokens (issue 50): each trial's, and what the sweep itself cost.

Prices are the user's (the study's `prices: {H100: 2.5}` or `--price H100=2.5`): dollars per
GPU-hour per accelerator type, as Ray names it; farm looks nothing up. A trial's dollars per
million tokens are its price x the GPUs it holds over the tokens it serves in an hour:
`price x gpus / (tokens per second x 3600) x 1e6`, for output tokens (`output_tps`) and for all
tokens (`total_tps`), the rates from the runs' totals. The interval carries over from the
throughput's (the Student-t interval of its mean over the runs): a cost is the reciprocal of a
throughput, so its low end is at the throughput's high end and the other way round; a throughput
interval reaching zero leaves the cost's high end unbounded (None). Where a profile is a capacity
search (`kind: capacity`), the cost is also given at the trial's SLO capacity, from its one run at
that load (no interval). Energy per million tokens is the mean over the runs of 1e6 / tokens per
joule (farm/analysis/energy.py), with its own t-interval over the runs; never filled where a run
was not measured. The sweep's GPU-hours (starts, warm-up, runs, failures, farm's own:
farm/analysis/gpu_time.py) are priced per GPU model.
"""

from __future__ import annotations

from pydantic import Field

from farm.strict import Strict

from farm.analysis.accelerator import ray_name
from farm.analysis.gpu_time import GpuTime
from farm.analysis.records import Results, RunRecord
from farm.analysis.selection.models import MetricStats, Selection
from farm.analysis.stats.summary import summarize

HOW_TO_PRICE = ("give a price per GPU-hour: the study key `prices: {H100: 2.5}` or `--price H100=2.5` "
                "on farm sweep, farm report or farm analyze")


_Strict = Strict  # farm/strict.py: the one strict base


def price_of(prices: dict[str, float], gpu: str | None) -> tuple[str | None, float | None]:
    """The accelerator type a run's GPU (as its driver names it) is, and its price (case-insensitive)."""
    if not gpu:
        return None, None
    names = {ray_name(part) for part in gpu.split(",") if part.strip()} - {None}
    if len(names) != 1:
        return None, None
    name = names.pop()
    for key, value in prices.items():
        if key.lower() == name.lower():
            return name, value
    return name, None


class Amount(_Strict):
    """A figure per million tokens with the interval carried from the measurement it comes from."""

    value: float
    low: float | None = Field(default=None, description="Lower end; none: no interval (one run).")
    high: float | None = Field(default=None, description="Upper end; none: no interval, or unbounded.")
    runs: int = 1


def _per_million(rate: MetricStats | None, dollars_per_second: float) -> Amount | None:
    """Dollars per million tokens at a throughput (tokens/s) with its interval."""
    if rate is None or rate.mean <= 0:
        return None
    at = (lambda tps: dollars_per_second / tps * 1e6 if tps is not None and tps > 0 else None)
    low = at(rate.ci_high) if rate.ci_high is not None else None
    high = at(rate.ci_low) if rate.ci_low is not None else None
    return Amount(value=at(rate.mean), low=low, high=high, runs=rate.n)


def _energy_per_million(values: list[float], confidence: float) -> Amount | None:
    """Joules per million tokens over the runs (1e6 / tokens per joule each), mean and t-interval."""
    if not values:
        return None
    s = summarize([1e6 / v for v in values], confidence=confidence)
    return Amount(value=s.mean, low=s.ci_low, high=s.ci_high, runs=s.n)


class ProfileCost(_Strict):
    profile: str
    usd_per_m_output: Amount | None = Field(default=None, description="At the measured output_tps; none: no price.")
    usd_per_m_total: Amount | None = Field(default=None, description="At the measured total_tps; none: no price.")
    capacity_load: float | None = Field(default=None, description="A capacity profile: the SLO capacity's load.")
    usd_per_m_output_at_capacity: float | None = None
    usd_per_m_total_at_capacity: float | None = None
    j_per_m_output: Amount | None = Field(default=None, description="Joules per million output tokens over the runs.")
    j_per_m_total: Amount | None = None
    energy_runs: int = Field(default=0, description="Runs whose energy was measured.")
    energy_not_measured: str | None = Field(default=None, description="Why no run's energy was measured.")


class TrialCost(_Strict):
    trial: str
    label: str
    gpus: int | None
    accelerator: str | None = Field(default=None, description="Its GPU model as Ray names it, from its runs.")
    usd_per_gpu_hour: float | None = None
    not_priced: str | None = Field(default=None, description="Why it has no dollars (no price, no GPU).")
    profiles: list[ProfileCost]


class SweepPrice(_Strict):
    """What the sweep's GPU time on one GPU model cost."""

    accelerator: str | None
    gpu_hours: float
    usd_per_gpu_hour: float | None
    usd: float | None


class Costs(_Strict):
    prices: dict[str, float] = Field(default_factory=dict, description="Dollars per GPU-hour per accelerator type.")
    price_source: str | None = Field(default=None, description="Where the prices came from (the study, --price).")
    confidence: float = 0.95
    trials: list[TrialCost]
    sweep: list[SweepPrice] = Field(default_factory=list, description="The sweep's GPU-hours priced per GPU model.")

    def trial(self, trial: str) -> TrialCost | None:
        return next((t for t in self.trials if t.trial == trial), None)

    @property
    def priced(self) -> bool:
        return bool(self.prices)


def _not_priced(prices: dict[str, float], gpus: int | None, accelerator: str | None) -> str | None:
    if not prices:
        return "no price given"
    if not gpus:
        return "the trial holds no GPU (a price is per GPU-hour)"
    if accelerator is None:
        return "its runs recorded no one GPU model"
    return f"no price for {accelerator} (prices given: {', '.join(prices)})"


def _energies(records: list[RunRecord]) -> tuple[list[float], list[float], str | None]:
    out, total, why = [], [], None
    for r in records:
        e = r.energy
        if e.measured:
            if e.output_tokens_per_j:
                out.append(e.output_tokens_per_j)
            if e.total_tokens_per_j:
                total.append(e.total_tokens_per_j)
        elif r.measured:
            why = why or e.reason
    return out, total, why


def costs(results: Results, selection: Selection, prices: dict[str, float] | None = None, *,
          price_source: str | None = None, gpu_time: GpuTime | None = None, confidence: float = 0.95) -> Costs:
    """Each selection row's dollars and joules per million tokens, and the sweep's GPU time priced."""
    prices = dict(prices or {})
    # the level the throughputs' intervals were made at: the energy's are made at the same
    confidence = next((s.confidence for row in selection.trials for s in row.stats.values()), confidence)
    capacity = {(c.profile, row.trial): row for c in selection.capacity for row in c.rows}
    model_of: dict[str, str | None] = {}
    trials: dict[str, TrialCost] = {}
    for row in selection.trials:
        records = [r for r in results.trial_records(row.id) if r.profile == row.profile]
        prov = next((r.provenance for r in records if r.provenance is not None), None)
        gpus = prov.gpus if prov is not None else None
        accelerator, price = price_of(prices, prov.gpu if prov is not None else None)
        model_of[row.id] = accelerator
        tc = trials.get(row.id)
        if tc is None:
            tc = trials[row.id] = TrialCost(
                trial=row.id, label=row.name or row.id, gpus=gpus, accelerator=accelerator,
                usd_per_gpu_hour=price if gpus else None,
                not_priced=None if price is not None and gpus else _not_priced(prices, gpus, accelerator), profiles=[])
        per_s = tc.usd_per_gpu_hour * gpus / 3600 if tc.usd_per_gpu_hour is not None and gpus else None
        pc = ProfileCost(profile=row.profile)
        if per_s is not None:
            pc.usd_per_m_output = _per_million(row.stats.get("output_tps"), per_s)
            pc.usd_per_m_total = _per_million(row.stats.get("total_tps"), per_s)
        cap = capacity.get((row.profile, row.id))
        if cap is not None and cap.capacity is not None:
            pc.capacity_load = cap.capacity
            point = next((p for p in cap.curve if p.load == cap.capacity), None)
            if per_s is not None and point is not None:
                pc.usd_per_m_output_at_capacity = per_s / point.output_tps * 1e6 if point.output_tps else None
                pc.usd_per_m_total_at_capacity = per_s / point.total_tps * 1e6 if point.total_tps else None
        out_tpj, total_tpj, why = _energies(records)
        pc.j_per_m_output = _energy_per_million(out_tpj, confidence)
        pc.j_per_m_total = _energy_per_million(total_tpj, confidence)
        pc.energy_runs = len(total_tpj)
        pc.energy_not_measured = why if not total_tpj else None
        tc.profiles.append(pc)
    sweep: dict[str | None, float] = {}
    if gpu_time is not None:
        for t in gpu_time.trials:
            model = model_of.get(t.trial)
            if model is None:
                prov = next((r.provenance for r in results.trial_records(t.trial) if r.provenance), None)
                model = price_of(prices, prov.gpu if prov else None)[0]
            if t.gpus:
                sweep[model] = sweep.get(model, 0.0) + t.seconds.total * t.gpus / 3600
    priced = []
    for model, hours in sorted(sweep.items(), key=lambda kv: str(kv[0])):
        price = price_of(prices, model)[1] if model else None
        priced.append(SweepPrice(accelerator=model, gpu_hours=hours, usd_per_gpu_hour=price,
                                 usd=hours * price if price is not None else None))
    return Costs(prices=prices, price_source=price_source, confidence=confidence, trials=list(trials.values()),
                 sweep=priced)
