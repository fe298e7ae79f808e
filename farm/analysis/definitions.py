"""What each of farm's numbers means, in the words vLLM's `bench serve`, SGLang's `bench_serving`
and NVIDIA's AIPerf use, and where farm gets it (guidellm 0.8.1's report). One table, shown by
the README and by every report, so that a column named TPOT is TPOT.

guidellm 0.8.1 gives two per-request figures a reader may take for TPOT:
`time_per_output_token_ms` is the request's latency over *all* its output tokens, the first one
included (its docstring says so; every H200 run matched latency / tokens to 0.01 ms), and
`inter_token_latency_ms` is (last token - first token) / (output tokens - 1), the time per token
*after* the first: TPOT as the field defines it. farm's `tpot_*` is the second; the first is
kept as `latency_per_output_token_*`. guidellm weighs each request by its output tokens - 1 when
it takes the mean and percentiles: with equal output lengths (every fixed-length profile) that is
vLLM's mean TPOT exactly, otherwise the token-weighted mean, which is vLLM's mean ITL.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Definition:
    name: str          # as the report's tables name it
    keys: str          # farm's metric keys (MLflow `<profile>/<key>`, results files)
    meaning: str       # what it is, in the field's terms
    source: str        # where farm gets it


DEFINITIONS: tuple[Definition, ...] = (
    Definition("TTFT", "ttft_{mean,median,p95,p99}_ms",
               "time from sending the request to the first generated token (reasoning tokens count: a "
               "`--reasoning-parser` streams them as reasoning deltas, which guidellm times too)",
               "guidellm time_to_first_token_ms, over requests"),
    Definition("TPOT", "tpot_{mean,median,p95,p99}_ms",
               "time per output token after the first, per request: (latency - TTFT) / (output tokens - 1), "
               "as vLLM, SGLang and AIPerf define it",
               "guidellm inter_token_latency_ms (requests weighted by output tokens - 1: vLLM's mean TPOT when "
               "output lengths are equal, its mean ITL otherwise)"),
    Definition("ITL", "itl_{mean,median,p95,p99}_ms",
               "mean gap between consecutive tokens; its mean over all tokens equals TPOT's token-weighted mean",
               "guidellm inter_token_latency_ms (guidellm 0.8.1 keeps no per-gap distribution: its percentiles "
               "are of per-request means, not of single gaps)"),
    Definition("Latency per output token", "latency_per_output_token_{mean,median,p95,p99}_ms",
               "the request's whole latency over all its output tokens, first token included; not TPOT",
               "guidellm time_per_output_token_ms"),
    Definition("E2E latency", "latency_{mean,median,p95,p99}_s",
               "time from sending the request to its last token", "guidellm request_latency"),
    Definition("Total / output throughput", "total_tps, output_tps",
               "(prompt + output) or output tokens of the successful requests over the run's duration, from "
               "totals (what the seed's Total tok/s means)",
               "guidellm's token totals and duration; guidellm's windowed mean rate is kept as "
               "guidellm_total_tps_mean and checked against it"),
    Definition("Steady-state throughput", "steady_tps, steady_output_tps, steady_window_s",
               "(prompt + output) or output tokens per second over the window in which the client held its full "
               "concurrency: from the requests in flight first reaching the profile's max_concurrency to the last "
               "request sent, ramp-up and drain left out; none where the run had no such window (under 20 % of it)",
               "guidellm's per-request timings (start, first and last token) and token counts: output tokens spread "
               "from a request's first token to its last, prompt tokens at its first (farm/analysis/steady.py)"),
    Definition("Request throughput", "request_throughput", "successful requests per second of the run",
               "guidellm's request totals and duration"),
    Definition("Success rate, lost requests", "success_rate, client_lost_requests",
               "successful requests over the requests the profile sent; a request the client sent and never "
               "accounted for (neither successful, errored nor incomplete, no time limit reached) is lost, not a "
               "success",
               "guidellm's request totals and its scheduler's count of requests created and processed"),
    Definition("Goodput", "goodput_rps, slo_attainment",
               "requests per second (and their share) that met the profile's TTFT and TPOT limits, each request "
               "on its own (DistServe's goodput)",
               "guidellm's SLO-conforming requests (slo.goodput)"),
)


def definitions_table() -> list[list[str]]:
    """Rows for a table: name, farm's keys, meaning, source."""
    return [[d.name, d.keys, d.meaning, d.source] for d in DEFINITIONS]
