"""The steady-state throughput of one run, from guidellm's per-request timings (pure).

A run's totals-based rate (`total_tps`: tokens / duration) mixes three phases: the ramp-up, while
the client fills its concurrency; the steady state, while it holds it; and the drain after its last
request was sent, when fewer and fewer requests remain and the long tail of output lengths sets the
run's end. On the H200 the deciding profile's runs lasted about 60 s and ended in such a drain, so
the totals-based rate moved with where the longest outputs fell. The steady-state rate is the rate
over the window in which the client holds its full concurrency alone:

- the window opens when the requests in flight first reach the run's concurrency (the profile's
  `max_concurrency`; a profile without one: the most in flight at any time), and closes when the
  last request is sent (from then on nothing replaces a request that ends: the drain);
- the tokens in it: each successful request's output tokens spread evenly from its first token to
  its last, its prompt tokens counted when its first token came (the prefill is done then);
- `steady_tps` = (prompt + output tokens in the window) / the window's length, `steady_output_tps`
  the output tokens alone.

A run without such a window (it never held its concurrency before its last request was sent, or
the window is shorter than `MIN_WINDOW_SHARE` of the run) has no steady-state rate, and says why.
guidellm 0.8.1 writes each request's timings under `benchmarks[].requests` (farm keeps the report
slimmed of them after parsing: the actor computes this before).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

# A window shorter than this share of the run's duration measures a moment, not a state.
MIN_WINDOW_SHARE = 0.2


@dataclass(frozen=True)
class Request:
    """One request as the steady-state rate needs it (seconds, epoch)."""

    start: float
    end: float
    first_token: float | None = None
    last_token: float | None = None
    prompt_tokens: float = 0.0
    output_tokens: float = 0.0
    ok: bool = True


@dataclass(frozen=True)
class Steady:
    """The steady-state window of one run and its rates; `tps` is None when there is none (`why`)."""

    tps: float | None
    output_tps: float | None
    window_s: float | None
    opened_at: float | None = None
    closed_at: float | None = None
    concurrency: int | None = None
    why: str | None = None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def requests_of(bench: dict) -> list[Request] | None:
    """The requests of one guidellm 0.8 benchmark (`benchmarks[i]`), or None when the report holds
    no per-request records (a slimmed report, an older guidellm)."""
    groups = bench.get("requests")
    if not isinstance(groups, dict):
        return None
    out: list[Request] = []
    for status in ("successful", "errored", "incomplete"):
        for rec in groups.get(status) or []:
            if not isinstance(rec, dict):
                continue
            timings = ((rec.get("info") or {}).get("timings")) or {}
            start = _num(rec.get("request_start_time")) or _num(timings.get("request_start")) or \
                _num(timings.get("resolve_start"))
            end = _num(rec.get("request_end_time")) or _num(timings.get("request_end")) or \
                _num(timings.get("resolve_end"))
            if start is None or end is None:
                continue
            out.append(Request(start=start, end=max(end, start),
                               first_token=_num(timings.get("first_token_iteration")),
                               last_token=_num(timings.get("last_token_iteration")),
                               prompt_tokens=_num(rec.get("prompt_tokens")) or 0.0,
                               output_tokens=_num(rec.get("output_tokens")) or 0.0,
                               ok=status == "successful"))
    return out


def _opened(requests: list[Request], concurrency: int | None) -> tuple[float | None, int]:
    """When the requests in flight first reached `concurrency` (None: their most at any time), and that count."""
    events = sorted([(r.start, 1) for r in requests] + [(r.end, -1) for r in requests], key=lambda e: (e[0], e[1]))
    if concurrency is None:
        level = peak = 0
        for _, step in events:
            level += step
            peak = max(peak, level)
        concurrency = peak
    level = 0
    for t, step in events:
        level += step
        if level >= concurrency:
            return t, concurrency
    return None, concurrency


def _share(a: float, b: float, lo: float, hi: float) -> float:
    """How much of the interval (a, b] lies in [lo, hi], as a fraction of it."""
    if b <= a:
        return 1.0 if lo <= b <= hi else 0.0
    return max(0.0, min(b, hi) - max(a, lo)) / (b - a)


def tokens_in(requests: Iterable[Request], lo: float, hi: float) -> tuple[float, float]:
    """(prompt, output) tokens of the successful requests that fall in [lo, hi]."""
    prompt = output = 0.0
    for r in requests:
        if not r.ok:
            continue
        first = r.first_token if r.first_token is not None else r.end
        last = r.last_token if r.last_token is not None else first
        if lo <= first <= hi:
            prompt += r.prompt_tokens
        if r.output_tokens <= 0:
            continue
        # the first token when it came, the others evenly over (first, last]
        output += (1.0 if lo <= first <= hi else 0.0) + (r.output_tokens - 1) * _share(first, last, lo, hi)
    return prompt, output


def steady_state(requests: list[Request] | None, concurrency: int | None, duration_s: float | None = None) -> Steady:
    """The steady-state rates of one run's requests at `concurrency` (the profile's most in flight)."""
    if not requests:
        return Steady(None, None, None, why="the report holds no per-request timings")
    opened, level = _opened(requests, concurrency)
    if opened is None:
        return Steady(None, None, None, concurrency=level,
                      why=f"the requests in flight never reached the run's concurrency ({level})")
    closed = max(r.start for r in requests)  # the last request sent: the drain begins
    span = (max(r.end for r in requests) - min(r.start for r in requests)) if duration_s is None else duration_s
    window = closed - opened
    if window <= 0 or (span > 0 and window < MIN_WINDOW_SHARE * span):
        return Steady(None, None, max(window, 0.0), opened, closed, level,
                      why=(f"the client held its concurrency ({level}) for {max(window, 0.0):.2f} s of a "
                           f"{span:.2f} s run before its last request was sent: no steady state (under "
                           f"{MIN_WINDOW_SHARE:.0%} of the run)"))
    prompt, output = tokens_in(requests, opened, closed)
    return Steady((prompt + output) / window, output / window, window, opened, closed, level)
