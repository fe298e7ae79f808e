"""Result models (trial, profile run, metrics) and the parser of guidellm's JSON report.

Metric names follow the seed's "Serving Benchmark Result" block (see
`shared/reference/seed-results.json`). Throughput is computed from totals: `total_tps` is the
prompt plus output tokens of successful requests divided by the benchmark's duration;
guidellm's own windowed mean rate is kept beside it as `guidellm_total_tps_mean`, and the rate
while the client held its full concurrency (ramp-up and drain left out) as `steady_tps`
(farm/analysis/steady.py).
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

# The machine's models live beside this module, and stay importable from here (actors/machine.py).
from farm.analysis.machine_models import GpuSamples, MachineFingerprint, Spread  # noqa: F401  (re-exported)
from farm.analysis.quality_runs import QualityRun
from farm.analysis.steady import Steady, requests_of, steady_state
from farm.study.trial import Trial

# 2: `tpot_*` became the field's TPOT (guidellm's inter-token latency); guidellm's own figure,
# latency over all output tokens, is `latency_per_output_token_*` (farm/analysis/definitions.py).
SCHEMA_VERSION = 2


class Status(str, Enum):
    ok = "ok"
    engine_failed_to_start = "engine_failed_to_start"
    engine_crashed = "engine_crashed"
    oom = "oom"
    invalid_flags = "invalid_flags"
    bench_failed = "bench_failed"
    low_success_rate = "low_success_rate"
    node_lost = "node_lost"
    timeout = "timeout"
    dataset_missing = "dataset_missing"
    port_in_use = "port_in_use"
    connection_error = "connection_error"
    cancelled = "cancelled"
    # Never started: what it would measure means nothing here (speculative decoding on random
    # weights rejects every draft token); the reason says why and how to measure it anyway.
    not_measurable = "not_measurable"
    # Started, and its engine overrode the knob that set it apart from a trial already measured:
    # every limit its log states is that trial's (farm/analysis/twins.py), so it is not measured
    # twice; the reason names the trial whose runs are this configuration's.
    same_server = "same_server"


# What each status means for retries, resume and a trial's status: farm/analysis/outcome.py.


class RunMetrics(BaseModel):
    """One benchmark run's numbers, named as in the seed's report."""

    model_config = ConfigDict(extra="forbid")

    successful_requests: float
    errored_requests: float = 0
    incomplete_requests: float = 0
    total_requests: float
    success_rate: float = Field(description="Successful requests over all requests the profile asked for (sent): "
                                            "a request the client lost (`client_lost_requests`) is not a success.")
    client_lost_requests: float = Field(
        default=0, description="Requests guidellm sent and never accounted for (neither successful, errored nor "
                               "incomplete): its benchmark finished, with no limit reached, while they were still in "
                               "flight (999 of 1,000 counted on the H200). Counted as lost, not as served.")
    max_concurrency: float | None = None
    duration_s: float
    total_input_tokens: float
    total_output_tokens: float
    request_throughput: float
    output_tps: float
    total_tps: float = Field(description="(prompt + output tokens of successful requests) / duration.")
    steady_tps: float | None = Field(
        default=None, description="(prompt + output tokens) per second over the window in which the client held its "
                                  "full concurrency, ramp-up and drain left out (farm/analysis/steady.py); none where "
                                  "the run had no such window or its report no per-request timings.")
    steady_output_tps: float | None = Field(default=None, description="Output tokens per second over that window.")
    steady_window_s: float | None = Field(default=None, description="That window's length (seconds).")
    guidellm_total_tps_mean: float | None = Field(default=None, description="guidellm's own windowed mean token rate.")
    guidellm_output_tps_mean: float | None = None
    peak_output_tps: float | None = None
    peak_concurrency: float | None = None
    latency_mean_s: float | None = None
    latency_median_s: float | None = None
    latency_p95_s: float | None = None
    latency_p99_s: float | None = None
    ttft_mean_ms: float | None = None
    ttft_median_ms: float | None = None
    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    # TPOT as vLLM, SGLang and AIPerf mean it: per request, (latency - TTFT) / (output tokens - 1),
    # the time per token after the first (farm/analysis/definitions.py). guidellm calls it
    # inter_token_latency_ms and weighs each request by its output tokens - 1.
    tpot_mean_ms: float | None = None
    tpot_median_ms: float | None = None
    tpot_p95_ms: float | None = None
    tpot_p99_ms: float | None = None
    # guidellm's time_per_output_token_ms: the request's latency over all its output tokens, the
    # first one included; not TPOT as the field means it.
    latency_per_output_token_mean_ms: float | None = None
    latency_per_output_token_median_ms: float | None = None
    latency_per_output_token_p95_ms: float | None = None
    latency_per_output_token_p99_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_median_ms: float | None = None
    itl_p95_ms: float | None = None
    itl_p99_ms: float | None = None
    timed_token_gaps: float | None = Field(
        default=None, description="Token gaps the client timed (guidellm's inter_token_latency_ms count): successful "
                                  "requests x (output tokens - 1) when it timed every token.")
    slo_attainment: float | None = Field(
        default=None, description="guidellm goodput: share of requests meeting the profile's latency SLOs (slo.goodput).")
    goodput_rps: float | None = Field(default=None, description="guidellm goodput: SLO-conforming requests per second.")


class ProfileRun(BaseModel):
    """One benchmark run of one profile on one trial's engine (one of possibly several repeats)."""

    model_config = ConfigDict(extra="forbid")

    profile: str
    repeat: int = 0
    status: Status
    reason: str | None = None
    metrics: RunMetrics | None = None
    started_at: float | None = None
    finished_at: float | None = None
    report_file: str | None = Field(default=None, description="guidellm's JSON report, relative to the trial directory.")
    cache_reset: bool | None = Field(default=None, description="Whether the prefix cache was reset before this run.")
    client_forked: bool | None = Field(default=None, description="Whether the run's guidellm client was forked by its "
                                       "node's client host (guidellm loaded once a node) rather than started by the "
                                       "trial; None where farm did not say (results from before it did).")
    engine_counters: dict[str, float] = Field(
        default_factory=dict, description="The engine's own counters over this run (after minus before), "
        "e.g. prefix_cache_hits, from its /metrics endpoint.")
    warnings: list[str] = Field(default_factory=list)
    node: str | None = Field(default=None, description="Node of this run when it differs from the trial's "
                             "(a later pass of `--repeats auto` may run elsewhere); none = the trial's node.")
    node_id: str | None = Field(default=None, description="Ray node id of `node`: one hostname can name several "
                                "nodes (lent GPU machines are all 'vm'), so a later pass on another machine is told "
                                "apart by it; none = not recorded (results from before it was).")
    pass_index: int = Field(default=1, ge=1, description="Pass of `--repeats auto` this run belongs to (1 = the first).")
    load: float | None = Field(default=None, description="A capacity profile's run: the concurrency or rate it ran at; "
                               "`repeat` is then its place in the search.")
    gpu: GpuSamples | None = Field(default=None, description="The GPUs' clocks, temperature and power over the run; "
                                   "none: not recorded (results from before it was).")
    machine: str | None = Field(default=None, description="The key of the machine the run ran on "
                                "(MachineFingerprint.key); none: not recorded.")


class WarmupRun(BaseModel):
    """An unrecorded run before a profile's measured runs (the profile's `warmup_requests`)."""

    model_config = ConfigDict(extra="forbid")

    profile: str
    requests: int
    seconds: float
    ok: bool
    reason: str | None = None


def migrate_tpot(metrics: Any) -> Any:
    """A run's metrics as farm stored them before schema 2: their `tpot_*` were guidellm's latency
    per output token (first token included); the field's TPOT is what they stored as `itl_*`."""
    if not isinstance(metrics, dict) or "latency_per_output_token_mean_ms" in metrics:
        return metrics
    out = dict(metrics)
    for stat in ("mean", "median", "p95", "p99"):
        old = out.pop(f"tpot_{stat}_ms", None)
        if old is not None:
            out[f"latency_per_output_token_{stat}_ms"] = old
        if out.get(f"itl_{stat}_ms") is not None:
            out[f"tpot_{stat}_ms"] = out[f"itl_{stat}_ms"]
    return out


class HeldSpan(BaseModel):
    """One time a trial held its GPUs: its first pass, or a later pass (or rung) on a fresh engine."""

    model_config = ConfigDict(extra="forbid")

    pass_index: int = Field(ge=1)
    started_at: float
    finished_at: float
    node: str | None = None
    engine_start_recorded: bool = Field(
        default=True, description="False for a span read back from its runs' own times (a pass stored before "
        "spans were): the engine's start before its first run is then not in it.")
    engine_reported: dict[str, Any] | None = Field(
        default=None, description="What the engine of this span reported of its start (ready_s, compile cache, "
        "start phases): the start that served this pass's runs. None where not recorded: a later pass stored "
        "before spans carried it, whose runs then have no engine start in their provenance.")

    @property
    def seconds(self) -> float:
        return max(self.finished_at - self.started_at, 0.0)


class TrialResult(BaseModel):
    """Everything one trial produced: its status, the exact command, versions, node and every run."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    sweep_id: str
    trial: Trial
    status: Status
    reason: str | None = None
    command: list[str] = Field(default_factory=list, description="Exact argv of the engine server (secrets masked).")
    serve_command: str = Field(default="", description="What a user pastes to serve this configuration.")
    engine_version: str | None = None
    guidellm_version: str | None = None
    node: str | None = None
    node_ip: str | None = None
    gpus: list[str] = Field(default_factory=list, description="GPU ids the engine saw (CUDA_VISIBLE_DEVICES).")
    gpu_name: str | None = None
    engine_pid: int | None = Field(default=None, description="PID of the engine server (its process group id).")
    engine_port: int | None = Field(default=None, description="Port the engine server listened on.")
    node_id: str | None = Field(default=None, description="Ray node id the trial ran on.")
    previous_attempts: list[str] = Field(
        default_factory=list,
        description="Earlier attempts of this trial that failed transiently and were retried: "
        "'attempt N on node ID: status: reason'.",
    )
    attempt: int = 1
    started_at: float | None = None
    finished_at: float | None = None
    runs: list[ProfileRun] = Field(default_factory=list)
    warmup_runs: list[WarmupRun] = Field(default_factory=list, description="Warm-up runs before the measured ones.")
    engine_reported: dict[str, Any] = Field(default_factory=dict, description="What the engine says it got (KV capacity, ...).")
    machine: MachineFingerprint | None = Field(default=None, description="The machine the trial (its first pass) ran "
                                               "on; each run names its own by key.")
    log_tail: str = ""
    artifacts_dir: str | None = None
    quality: QualityRun | None = Field(default=None, description="Its answers to the quality gate's items, where "
                                       "it answered them (farm/analysis/quality_runs.py).")
    @model_validator(mode="before")
    @classmethod
    def _stored_before_field_tpot(cls, data: Any) -> Any:
        # Stored results always say their schema; one built in code is of this one.
        if isinstance(data, dict) and isinstance(data.get("schema_version"), int) and data["schema_version"] < 2:
            data = {**data, "schema_version": SCHEMA_VERSION,
                    "runs": [{**r, "metrics": migrate_tpot(r.get("metrics"))} if isinstance(r, dict) else r
                             for r in data.get("runs") or []]}
        return data

    spans: list[HeldSpan] = Field(
        default_factory=list, description="Each time the trial held its GPUs, once it ran more than once (later "
        "passes of --repeats auto, halving rungs); empty: one span, started_at to finished_at.")

    def runs_of(self, profile: str) -> list[ProfileRun]:
        return [r for r in self.runs if r.profile == profile]

    def held_spans(self) -> list[HeldSpan]:
        """Each time the trial held its GPUs. A result merged before spans were recorded has its
        later passes' spans read from their runs' own times (flagged: no engine start in them),
        and its first pass's from its start to the last first-pass run's end."""
        if self.spans:
            return list(self.spans)
        if self.started_at is None or self.finished_at is None or self.status == Status.not_measurable:
            return []  # never started
        later = sorted({r.pass_index for r in self.runs if r.pass_index > 1})
        if not later:
            # one pass so far: the trial's own engine facts are its first (and only) start's
            return [HeldSpan(pass_index=1, started_at=self.started_at, finished_at=self.finished_at, node=self.node,
                             engine_reported=dict(self.engine_reported))]
        out = []
        for index in [1, *later]:
            runs = [r for r in self.runs if r.pass_index == index and r.started_at and r.finished_at]
            if not runs:
                continue
            start = self.started_at if index == 1 else min(r.started_at for r in runs)
            out.append(HeldSpan(pass_index=index, started_at=start, finished_at=max(r.finished_at for r in runs),
                                node=runs[0].node or self.node, engine_start_recorded=index == 1))
        return out

    @property
    def held_seconds(self) -> float | None:
        """Seconds the trial held its GPUs in all (the sum of its spans), None when not recorded."""
        spans = self.held_spans()
        return round(sum(s.seconds for s in spans), 2) if spans else None


# --------------------------------------------------------------------------------------
# guidellm 0.8 JSON report -> RunMetrics


class ReportError(ValueError):
    """The guidellm report is missing or not in the shape this parser knows."""


def _stat(metrics: dict, name: str, stat: str, scope: str = "successful") -> float | None:
    node = (metrics.get(name) or {}).get(scope) or {}
    if stat.startswith("p"):
        value = (node.get("percentiles") or {}).get(stat)
    else:
        value = node.get(stat)
    return float(value) if value is not None else None


def _lost_by_client(state: dict, accounted: float) -> float:
    """Requests guidellm sent and never accounted for (`accounted`: successful, errored and incomplete
    as it reports them), in a run no time limit ended. guidellm 0.8.1 can finish a `max_requests`
    run before the last response's update reaches its scheduler (on a busy 2-core machine: created 8,
    processed 7, one "processing", no end of processing recorded, while the server had answered all 8
    with 200; on the H200, 999 of 1,000). Such a request is lost: not a success, whatever the server
    did. A run that a time limit ended keeps its unfinished requests as the time limit's (a timeout,
    not a loss). `state` is the benchmark's `scheduler_state`."""
    limits = {**(state.get("end_queuing_constraints") or {}), **(state.get("scheduler_constraints") or {})}
    if any((c.get("metadata") or {}).get("duration_exceeded") for c in limits.values() if isinstance(c, dict)):
        return 0.0
    sent = state.get("created_requests")
    if not isinstance(sent, (int, float)):
        return 0.0
    return max(0.0, float(sent) - accounted)


def steady_of(bench: dict) -> Steady:
    """The steady-state window of one benchmark of a guidellm 0.8 report (farm/analysis/steady.py),
    at the concurrency its strategy held (`max_concurrency`, or a concurrent strategy's streams)."""
    strategy = (bench.get("config") or {}).get("strategy") or {}
    level = strategy.get("max_concurrency") or strategy.get("streams")
    level = int(level) if isinstance(level, (int, float)) and not isinstance(level, bool) and level > 0 else None
    duration = bench.get("duration")
    return steady_state(requests_of(bench), level, float(duration) if isinstance(duration, (int, float)) else None)


def parse_benchmark(bench: dict, total_requests: int | None = None) -> RunMetrics:
    """One entry of `benchmarks[]` of a guidellm 0.8 report."""
    try:
        m = bench["metrics"]
        totals = m["request_totals"]
        duration = float(bench["duration"])
    except (KeyError, TypeError) as exc:
        raise ReportError(f"guidellm report lacks {exc}") from None
    ok = float(totals.get("successful", 0))
    state = bench.get("scheduler_state") or {}
    # the profile's requests; without them, what guidellm sent (its own total leaves the lost ones out)
    asked = float(total_requests or max(float(totals.get("total") or 0), float(state.get("created_requests") or 0)))
    # guidellm 0.8.1 leaves requests that complete after its measurement window closes out of its
    # metrics, while its scheduler still counts them as successful: they were served, so they
    # count toward the success rate (the token totals stay those of the window).
    served = max(ok, float(state.get("successful_requests") or 0))
    errored, incomplete = float(totals.get("errored", 0)), float(totals.get("incomplete", 0))
    lost = _lost_by_client(state, max(float(state.get("processed_requests") or 0), served + errored + incomplete))
    prompt = _stat(m, "prompt_token_count", "total_sum") or 0.0
    output = _stat(m, "output_token_count", "total_sum") or 0.0
    # Guard against a zero-length benchmark (e.g. every request failed at once).
    per_s = (lambda x: x / duration) if duration > 0 else (lambda x: 0.0)
    strategy = (bench.get("config") or {}).get("strategy") or {}
    conc = (m.get("request_concurrency") or {}).get("total") or {}
    steady = steady_of(bench)
    return RunMetrics(
        successful_requests=ok,
        errored_requests=errored,
        incomplete_requests=incomplete,
        total_requests=asked,
        # over the requests sent: a request the client lost is not a success
        success_rate=min(1.0, served / asked) if asked > 0 else 0.0,
        client_lost_requests=lost,
        max_concurrency=strategy.get("max_concurrency"),
        duration_s=duration,
        total_input_tokens=prompt,
        total_output_tokens=output,
        request_throughput=per_s(ok),
        output_tps=per_s(output),
        total_tps=per_s(prompt + output),
        steady_tps=steady.tps,
        steady_output_tps=steady.output_tps,
        steady_window_s=steady.window_s,
        guidellm_total_tps_mean=_stat(m, "tokens_per_second", "mean"),
        guidellm_output_tps_mean=_stat(m, "output_tokens_per_second", "mean"),
        peak_output_tps=_stat(m, "output_tokens_per_second", "max"),
        peak_concurrency=float(conc["max"]) if conc.get("max") is not None else None,
        latency_mean_s=_stat(m, "request_latency", "mean"),
        latency_median_s=_stat(m, "request_latency", "median"),
        latency_p95_s=_stat(m, "request_latency", "p95"),
        latency_p99_s=_stat(m, "request_latency", "p99"),
        ttft_mean_ms=_stat(m, "time_to_first_token_ms", "mean"),
        ttft_median_ms=_stat(m, "time_to_first_token_ms", "median"),
        ttft_p95_ms=_stat(m, "time_to_first_token_ms", "p95"),
        ttft_p99_ms=_stat(m, "time_to_first_token_ms", "p99"),
        tpot_mean_ms=_stat(m, "inter_token_latency_ms", "mean"),
        tpot_median_ms=_stat(m, "inter_token_latency_ms", "median"),
        tpot_p95_ms=_stat(m, "inter_token_latency_ms", "p95"),
        tpot_p99_ms=_stat(m, "inter_token_latency_ms", "p99"),
        latency_per_output_token_mean_ms=_stat(m, "time_per_output_token_ms", "mean"),
        latency_per_output_token_median_ms=_stat(m, "time_per_output_token_ms", "median"),
        latency_per_output_token_p95_ms=_stat(m, "time_per_output_token_ms", "p95"),
        latency_per_output_token_p99_ms=_stat(m, "time_per_output_token_ms", "p99"),
        itl_mean_ms=_stat(m, "inter_token_latency_ms", "mean"),
        itl_median_ms=_stat(m, "inter_token_latency_ms", "median"),
        itl_p95_ms=_stat(m, "inter_token_latency_ms", "p95"),
        itl_p99_ms=_stat(m, "inter_token_latency_ms", "p99"),
        timed_token_gaps=_stat(m, "inter_token_latency_ms", "count"),
        slo_attainment=m.get("slo_attainment"),
        goodput_rps=_stat(m, "request_goodput", "mean"),
    )


def parse_report(data: dict | str | Path, total_requests: int | None = None) -> tuple[RunMetrics, str | None]:
    """A guidellm JSON report (dict, JSON text or file) -> metrics of its one benchmark, guidellm version."""
    if isinstance(data, Path) or (isinstance(data, str) and not data.lstrip().startswith("{")):
        try:
            data = json.loads(Path(data).read_text())
        except (OSError, ValueError) as exc:
            raise ReportError(f"cannot read guidellm report: {exc}") from None
    elif isinstance(data, str):
        data = json.loads(data)
    benches = data.get("benchmarks") if isinstance(data, dict) else None
    if not benches:
        raise ReportError("guidellm report has no benchmarks")
    version = (data.get("metadata") or {}).get("guidellm_version")
    return parse_benchmark(benches[-1], total_requests), version


def stopped_by_time_limit(data: dict) -> bool:
    """Whether guidellm ended the (last) benchmark because its `max_duration` constraint fired."""
    benches = data.get("benchmarks") if isinstance(data, dict) else None
    if not benches:
        return False
    state = benches[-1].get("scheduler_state") or {}
    return "max_duration" in (state.get("end_processing_constraints") or {})


def benchmark_window(data: dict) -> tuple[float, float] | None:
    """The (last) benchmark's measured window, epoch seconds (its start and end time), or None."""
    benches = data.get("benchmarks") if isinstance(data, dict) else None
    if not benches:
        return None
    start, end = benches[-1].get("start_time"), benches[-1].get("end_time")
    if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end >= start:
        return float(start), float(end)
    return None


def slim_report(data: dict) -> dict:
    """The report without its per-request records, which are most of its size."""
    out = dict(data)
    out["benchmarks"] = [{k: v for k, v in b.items() if k != "requests"} for b in data.get("benchmarks", [])]
    return out
