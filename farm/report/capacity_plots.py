"""Capacity plots: each trial's latency and throughput against load with the SLO's lines, and every
trial's capacity side by side (matplotlib, loaded only when plots are asked for)."""

from __future__ import annotations

from pathlib import Path

from farm.report.layout import capacity_plot
from farm.report.models import Report


def _figure(rows: int, cols: int, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: only when plots are asked for
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5 * cols, max(2.8, height)), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(rows, cols, squeeze=False)


def plot_curves(report: Report, ranking, path: Path) -> Path:
    """Per trial: P95 TTFT and mean TPOT against load (SLO limits dashed, the capacity dotted),
    and throughput against load."""
    rows = [r for r in ranking.rows if r.curve]
    fig, axes = _figure(len(rows), 2, 2.6 * len(rows))
    for (lat, tput), r in zip(axes, rows):
        loads = [p.load for p in r.curve]
        lat.plot(loads, [p.ttft_p95_ms for p in r.curve], "o-", color="tab:blue", label="P95 TTFT")
        lat.plot(loads, [p.tpot_mean_ms for p in r.curve], "s-", color="tab:orange", label="mean TPOT")
        for p in r.curve:
            if not p.meets:
                lat.plot([p.load], [p.ttft_p95_ms or 0], "x", color="tab:red", markersize=10)
        for name, value, color in (("TTFT limit", ranking.ttft_p95_ms_max, "tab:blue"),
                                   ("TPOT limit", ranking.tpot_mean_ms_max, "tab:orange")):
            if value is not None:
                lat.axhline(value, linestyle="--", color=color, linewidth=1, label=f"{name} {value:g} ms")
        tput.plot(loads, [p.total_tps for p in r.curve], "o-", color="tab:green", label="total tok/s")
        for ax in (lat, tput):
            if r.capacity is not None:
                ax.axvline(r.capacity, linestyle=":", color="black", linewidth=1)
            ax.set_xlabel(f"{ranking.over} ({ranking.unit})")
        lat.set_ylabel("ms")
        tput.set_ylabel("tok/s")
        cap = f"capacity {r.capacity:g} {r.interval}" if r.capacity is not None else "no capacity"
        lat.set_title(f"{r.label}: latency ({cap})", fontsize=9)
        tput.set_title(f"{r.label}: throughput", fontsize=9)
        lat.legend(fontsize=7)
    fig.suptitle(f"{ranking.profile}: latency and throughput against load (x: broke the SLO; dotted: capacity)",
                 fontsize=10)
    fig.savefig(path, dpi=100)
    return path


def plot_capacities(report: Report, ranking, path: Path) -> Path:
    """Every trial's capacity, with the interval up to the lowest load that broke the SLO."""
    rows = ranking.rows
    fig, axes = _figure(1, 1, 0.45 * len(rows) + 1.5)
    ax = axes[0][0]
    labels = [r.label for r in rows][::-1]
    values = [r.capacity or 0 for r in rows][::-1]
    upper = [((r.high - r.capacity) if r.high is not None and r.capacity is not None else 0) for r in rows][::-1]
    colors = ["tab:green" if r.trial == ranking.recommended else ("tab:gray" if r.capacity else "lightgray")
              for r in rows][::-1]
    ax.barh(labels, values, xerr=[[0] * len(values), upper], color=colors, capsize=3)
    for y, r in enumerate(rows[::-1]):
        ax.text(values[y], y, f" {r.capacity:g}" if r.capacity is not None else " none", va="center", fontsize=8)
    ax.set_xlabel(f"capacity under the SLO: {ranking.over} ({ranking.unit}); whisker: up to the lowest load that broke it")
    ax.set_title(f"{ranking.profile}: capacity by trial (green: recommended)", fontsize=10)
    fig.savefig(path, dpi=100)
    return path


def write_capacity_plots(report: Report, out: Path) -> list[Path]:
    paths = []
    for ranking in report.selection.capacity:
        paths.append(plot_curves(report, ranking, out / f"capacity_curves_{ranking.profile}.png"))
        paths.append(plot_capacities(report, ranking, out / capacity_plot(ranking.profile)))
    return paths
