"""The report's PNG plots (matplotlib loads only when plots are asked for)."""

from __future__ import annotations

from pathlib import Path

from farm.errors import UserError
from farm.report.layout import THROUGHPUT_PLOT
from farm.report.models import Report
from farm.report.text import _conf

# --------------------------------------------------------------------------------------
# plots


def _profile_rows(report: Report) -> dict[str, list]:
    rows: dict[str, list] = {}
    for t in report.selection.trials:
        if t.total_tps is not None:
            rows.setdefault(t.profile, []).append(t)
    return rows


def _style(report: Report, trial) -> tuple[str, str]:
    sel = report.selection
    if trial.id == sel.recommended.trial:
        return "tab:green", "recommended"
    if sel.baseline and trial.id == sel.baseline.trial:
        return "tab:blue", "baseline"
    return ("tab:gray", "other") if trial.eligible else ("lightgray", "not eligible")


def _figure(rows: int, height: float):
    # The object API with the Agg canvas: no pyplot, no global backend switch, no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: only when plots are asked for
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, max(2.5, height)), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(rows, 1, squeeze=False)[:, 0]


def _err(trials, metric: str) -> tuple[list[float], list[float]]:
    """Distances from the mean to each end of the interval (0 without one), for error bars."""
    low, high = [], []
    for t in trials:
        st = t.stats.get(metric)
        ok = st is not None and st.ci_low is not None
        low.append(st.mean - st.ci_low if ok else 0.0)
        high.append(st.ci_high - st.mean if ok else 0.0)
    return low, high


def _bar_label(t) -> str:
    st = t.stats.get("total_tps")
    if st is None or st.ci_low is None:
        return f"{t.total_tps:.0f}"
    return f"{t.total_tps:.0f} \u00b1{(st.ci_high - st.ci_low) / 2:.0f} (n={st.n})"


def plot_throughput(report: Report, path: Path) -> Path:
    rows = _profile_rows(report)
    fig, axes = _figure(len(rows), sum(0.35 * len(v) + 0.9 for v in rows.values()))
    for ax, (profile, trials) in zip(axes, rows.items()):
        labels = [t.name or t.id for t in trials]
        styles = [_style(report, t) for t in trials]
        low, high = _err(trials, "total_tps")
        bars = ax.barh(labels, [t.total_tps for t in trials], color=[c for c, _ in styles],
                       hatch=[("//" if not t.eligible else "") for t in trials],
                       xerr=[low, high], error_kw={"ecolor": "black", "capsize": 3, "elinewidth": 1})
        for bar, t, up in zip(bars, trials, high):  # the label past the interval's end, not on it
            ax.annotate(_bar_label(t), (t.total_tps + up, bar.get_y() + bar.get_height() / 2), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=8)
        ax.invert_yaxis()
        ax.set_title(profile, fontsize=10, loc="left")
        ax.set_xlabel("total token throughput (tok/s)", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.margins(x=0.15)
    fig.suptitle(throughput_title(report), fontsize=9)
    fig.savefig(path, dpi=110)
    return path


def _has_intervals(report: Report) -> bool:
    return any(st is not None and st.ci_low is not None
               for t in report.selection.trials for st in (t.stats.get("total_tps"), t.stats.get("tpot_mean_ms")))


def throughput_title(report: Report) -> str:
    """The throughput plot's title: it names an interval and a colour only where the plot draws
    them (single runs have no interval; a sweep without a baseline has no blue bar)."""
    what = (f"mean and {_conf(report.selection.alpha)} interval over the repeats" if _has_intervals(report)
            else "one run each, no interval")
    keys = ["green: recommended"] + (["blue: baseline"] if report.selection.baseline else [])
    if any(not t.eligible for t in report.selection.trials):
        keys.append("hatched: not eligible")
    return f"Total token throughput per profile and trial, {what} ({', '.join(keys)})"


def tpot_title(report: Report) -> str:
    intervals = ", with intervals" if _has_intervals(report) else ", one run each"
    return (f"Throughput against mean TPOT{intervals} (up and left is better; x: not eligible; "
            "orange: the Pareto front of eligible trials)")


def plot_tps_vs_tpot(report: Report, path: Path) -> Path:
    rows = {p: [t for t in ts if t.tpot_mean_ms is not None] for p, ts in _profile_rows(report).items()}
    rows = {p: ts for p, ts in rows.items() if ts}
    fig, axes = _figure(max(1, len(rows)), 3.2 * max(1, len(rows)))
    for ax, (profile, trials) in zip(axes, rows.items()):
        # Numbers beside the points and names in the legend: trials that differ by one flag sit on
        # top of each other, and their full names would overlap into an unreadable blot.
        front = report.selection.pareto.get(profile, [])
        on_front = sorted((t for t in trials if t.id in front), key=lambda t: t.tpot_mean_ms)
        if on_front:
            ax.plot([t.tpot_mean_ms for t in on_front], [t.total_tps for t in on_front], color="tab:orange",
                    linewidth=1.2, linestyle="--", zorder=1, label="Pareto front")
        y_low, y_high = _err(trials, "total_tps")
        x_low, x_high = _err(trials, "tpot_mean_ms")
        for i, t in enumerate(trials, 1):
            color, _ = _style(report, t)
            ax.errorbar(t.tpot_mean_ms, t.total_tps, xerr=[[x_low[i - 1]], [x_high[i - 1]]],
                        yerr=[[y_low[i - 1]], [y_high[i - 1]]], fmt="o" if t.eligible else "x", color=color,
                        ecolor=color, elinewidth=0.8, capsize=2, zorder=2,
                        markeredgecolor="tab:orange" if t.id in front else color,
                        markeredgewidth=1.8 if t.id in front else 1.0,
                        label=f"{i}  {t.name or t.id}" + ("  (Pareto)" if t.id in front else ""))
            ax.annotate(str(i), (t.tpot_mean_ms, t.total_tps), fontsize=7, xytext=(4, 3), textcoords="offset points")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)
        ax.set_title(profile, fontsize=10, loc="left")
        ax.set_xlabel("mean TPOT (ms)", fontsize=8)
        ax.set_ylabel("total tok/s", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.margins(0.2)
    fig.suptitle(tpot_title(report), fontsize=9)
    fig.savefig(path, dpi=110)
    return path


def write_plots(report: Report, directory: str | Path) -> list[Path]:
    """Write the report's PNG plots into `directory`; returns their paths."""
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the plot directory: {exc.strerror}", file=str(out)) from None
    from farm.report.capacity_plots import write_capacity_plots

    return [plot_throughput(report, out / THROUGHPUT_PLOT), plot_tps_vs_tpot(report, out / "tps_vs_tpot.png"),
            *write_capacity_plots(report, out)]
