"""The report's small formatters, shared by its sections: numbers, signed percentages, the
confidence level, a difference's interval cell, trial labels and the one-flag-a-line command."""

from __future__ import annotations

import shlex

from farm.report.checks import decision_word
from farm.report.models import Report


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _signed(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.2f} %"


def pretty_command(command: str) -> str:
    """One flag per line, as the seed prints its serve command."""
    try:
        args = shlex.split(command)
    except ValueError:
        return command
    head = [a for a in args[: next((i for i, a in enumerate(args) if a.startswith("--")), len(args))]]
    # A flag and the values that follow it share a line (`--model-path Qwen/Qwen3`, SGLang's form):
    # a line per token broke every value from its flag.
    lines: list[list[str]] = []
    for arg in args[len(head):]:
        if arg.startswith("-") or not lines:
            lines.append([arg])
        else:
            lines[-1].append(arg)
    return " \\\n    ".join([shlex.join(head)] + [shlex.join(line) for line in lines])


def _conf(alpha: float) -> str:
    return f"{(1 - alpha) * 100:g} %"


def _ci_cell(d) -> str:
    if d is None:
        return "n/a"
    if d.ci_low_pct is None or d.ci_high_pct is None:  # why there is no interval, where it is known
        return "n/a (single runs)" if min(d.n_a, d.n_b) < 2 else f"n/a ({d.note})" if d.note else "n/a"
    if d.decision:
        mark = f" ({decision_word(d)})"
    else:
        mark = "" if d.significant is None else (" (significant)" if d.significant else " (not significant)")
    return f"[{d.ci_low_pct:+.2f}, {d.ci_high_pct:+.2f}] %, p = {d.p_holm:.3g}{mark}"


def _labels(report: Report) -> dict[str, str]:
    return {t.id: t.name or t.id for t in report.selection.trials}
