"""What a study's `repeats` means: a number of runs, or 'auto' (a first pass, then more where needed).

The significance level goes with it: a sweep that stops on its own looks at its data after every
pass, so each look is judged at `AUTO_ALPHA` (the reasoning is in farm/analysis/plan.py, which
plans the passes). Here, below the grid and the analysis, so both can ask.
"""

from __future__ import annotations

FAMILY_ALPHA = 0.05        # significance level of a sweep with a fixed number of repeats
AUTO_FIRST_PASS = 3        # repeats of the first pass of `--repeats auto`
AUTO_MAX_PASSES = 5        # looks at the data, first pass included
AUTO_ALPHA = FAMILY_ALPHA / AUTO_MAX_PASSES


def is_auto(repeats: int | str) -> bool:
    return repeats == "auto"


def first_pass_repeats(repeats: int | str) -> int:
    """Repeats of the first (or only) pass: the number itself, or `AUTO_FIRST_PASS` for 'auto'."""
    return AUTO_FIRST_PASS if is_auto(repeats) else int(repeats)


def alpha_for(repeats: int | str) -> float:
    """Significance level of a sweep's verdicts: stricter per look when the sweep stops on its own."""
    return AUTO_ALPHA if is_auto(repeats) else FAMILY_ALPHA


def parse_repeats(text: str | int) -> int | str:
    """CLI value of `--repeats`: a whole number >= 1 or 'auto'; ValueError otherwise."""
    if isinstance(text, int) and text >= 1:
        return text
    value = str(text).strip().lower()
    if value == "auto":
        return "auto"
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise ValueError(f"expected a whole number >= 1 or 'auto', got {text!r}")
