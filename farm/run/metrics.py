"""farm's own metrics in the Ray dashboard: trials by state and status, throughput of finished trials.

Recorded by the sweep driver with `ray.util.metrics`; Ray exports them, prefixed `ray_`, on the
Prometheus endpoint of the node the driver runs on (`metrics_export_port` of that node in
`ray.nodes()`), next to Ray's own metrics, so the Prometheus and Grafana that Ray's dashboard
uses (`ray metrics launch-prometheus`) chart them too:

- `ray_farm_trials{sweep, state}` (gauge): trials `pending`, `running` and `done` now.
- `ray_farm_trial_results_total{sweep, engine, status}` (counter): finished trials by status.
- `ray_farm_trial_retries_total{sweep, engine, status}` (counter): attempts retried, by the status that caused it.
- `ray_farm_trial_total_tps{sweep, engine, trial, profile}` (gauge): total tokens/s of a finished
  trial on a profile (mean over its repeats).
- `ray_farm_trial_output_tps{sweep, engine, trial, profile}` (gauge): output tokens/s, likewise.

Ray drops a gauge series that is not set again within two export intervals, so the driver sets
every gauge of the sweep again each interval (a daemon thread), until a minute after the last
trial. A failure to record a metric never fails a sweep: the metrics are for watching, MLflow
is the record.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "farm_"
TAGS = {
    "trials": ("sweep", "state"),
    "trial_results": ("sweep", "engine", "status"),
    "trial_retries": ("sweep", "engine", "status"),
    "trial_total_tps": ("sweep", "engine", "trial", "profile"),
    "trial_output_tps": ("sweep", "engine", "trial", "profile"),
}


def _mean_metric(result: Any, profile: str, attr: str) -> float | None:
    values = [getattr(r.metrics, attr) for r in result.runs_of(profile)
              if r.metrics is not None and getattr(r.metrics, attr) is not None]
    return sum(values) / len(values) if values else None


class SweepMetrics:
    """Metrics of one sweep, fed by the driver's trial events (`started`, `retry`, `finished`)."""

    def __init__(self, sweep_id: str, total: int):
        from ray.util.metrics import Counter, Gauge  # ray: the driver has it; parse_prometheus works without

        self.sweep = sweep_id
        self.total = total
        self.running = 0
        self.done = 0
        self._broken = False
        self._lock = threading.Lock()
        self._gauges: dict[tuple[str, tuple], tuple[Any, dict, float]] = {}
        self._ended: float | None = None
        self.trials = Gauge(PREFIX + "trials", description="Trials of the sweep by state (pending, running, done).",
                            tag_keys=TAGS["trials"])
        self.results = Counter(PREFIX + "trial_results", description="Finished trials by status.",
                               tag_keys=TAGS["trial_results"])
        self.retries = Counter(PREFIX + "trial_retries", description="Trial attempts retried, by the status that caused it.",
                               tag_keys=TAGS["trial_retries"])
        self.total_tps = Gauge(PREFIX + "trial_total_tps", description="Total tokens/s of a finished trial on a profile.",
                               tag_keys=TAGS["trial_total_tps"])
        self.output_tps = Gauge(PREFIX + "trial_output_tps", description="Output tokens/s of a finished trial on a profile.",
                                tag_keys=TAGS["trial_output_tps"])
        self._states()
        threading.Thread(target=self._refresh, name="farm-metrics", daemon=True).start()

    def _set(self, gauge: Any, value: float, tags: dict) -> None:
        with self._lock:
            self._gauges[(gauge.info["name"], tuple(sorted(tags.items())))] = (gauge, tags, value)
        gauge.set(value, tags=tags)

    def _refresh(self, linger_s: float = 60.0) -> None:
        try:
            import ray  # as above

            period = max(ray._config.metrics_report_interval_ms(), 1000) / 2000
        except Exception:
            period = 5.0
        while not self._broken and (self._ended is None or time.monotonic() - self._ended < linger_s):
            time.sleep(period)
            with self._lock:
                series = list(self._gauges.values())
            try:
                for gauge, tags, value in series:
                    gauge.set(value, tags=tags)
            except Exception:  # the driver is shutting down
                return

    def _states(self) -> None:
        pending = max(self.total - self.running - self.done, 0)
        for state, value in (("pending", pending), ("running", self.running), ("done", self.done)):
            self._set(self.trials, value, {"sweep": self.sweep, "state": state})
        if self.done >= self.total and self._ended is None:
            self._ended = time.monotonic()

    def on_event(self, kind: str, job: Any, result: Any) -> None:
        if self._broken:
            return
        try:
            self._record(kind, job, result)
        except Exception as exc:  # never let watching break the sweep
            self._broken = True
            log.warning("farm metrics disabled for this sweep: %s: %s", type(exc).__name__, exc)

    def _record(self, kind: str, job: Any, result: Any) -> None:
        engine = job.trial.engine
        if kind == "started":
            self.running += 1
        elif kind == "retry":
            self.running -= 1
            self.retries.inc(1, tags={"sweep": self.sweep, "engine": engine, "status": result.status.value})
        elif kind == "finished":
            self.running -= 1
            self.done += 1
            self.results.inc(1, tags={"sweep": self.sweep, "engine": engine, "status": result.status.value})
            for profile in result.trial.profiles:
                tags = {"sweep": self.sweep, "engine": engine, "trial": result.trial.label, "profile": profile}
                for gauge, attr in ((self.total_tps, "total_tps"), (self.output_tps, "output_tps")):
                    value = _mean_metric(result, profile, attr)
                    if value is not None:
                        self._set(gauge, value, tags)
        else:
            return
        self._states()


def parse_prometheus(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Samples of metric `name` in Prometheus text format: (labels, value) pairs."""
    out = []
    pattern = re.compile(r"^" + re.escape(name) + r"(?:\{(.*)\})?\s+(\S+)$")
    label = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        match = pattern.match(line)
        if match:
            out.append((dict(label.findall(match.group(1) or "")), float(match.group(2))))
    return out


def watch(on_event, sweep_id: str, total: int):
    """`on_event` that also records the sweep's metrics (a plain pass-through where Ray's metrics
    cannot be created, e.g. outside a Ray driver)."""
    try:
        metrics = SweepMetrics(sweep_id, total)
    except Exception as exc:  # never let watching break the sweep
        log.warning("farm metrics disabled for this sweep: %s: %s", type(exc).__name__, exc)
        return on_event

    def both(kind, job, result):
        metrics.on_event(kind, job, result)
        on_event(kind, job, result)

    return both
