"""What a study's `repeats` means: a number of runs, or 'auto' (a first pass, then more where needed).

The significance level goes with it. A sweep with a fixed number of repeats looks at its data
once, at `FAMILY_ALPHA`. A sweep that stops on its own (`--repeats auto`) looks after every pass
and stops when its decisions are made; judging every look at 0.05 would make a false decision
far likelier than 5 % over all the looks, so the looks share the 0.05 by a group-sequential
*alpha-spending* rule (`look_alphas`, below). farm/analysis/plan.py plans the passes and says
which look a sweep is at. Here, below the grid and the analysis, so both can ask.

Why this rule
-------------
Until December 2026 every look was judged at 0.05 / 5 = 0.01 (Bonferroni over the most looks a
sweep takes). That keeps the error under 5 % but wastes most of it: the looks are strongly
correlated (the second look's runs include the first's), and the last look, the one a close
decision reaches, got 0.01 where a fixed-repeats study gets 0.05. Simulated, a 5 % difference at
a 2 % CV was decided within 5 runs each 62 % of the time, against 90 % for `repeats: 5`.

Lan-DeMets spending with the O'Brien-Fleming-type function alpha(t) = 2 - 2 Phi(z_{1-a/2} / sqrt t)
(Lan & DeMets 1983, Biometrika 70:659) gives each look what is left of 0.05 as a function of its
*information fraction* t (runs each at this look / runs each at the planned last look), and the
nominal level of a look is solved exactly from the joint distribution of the looks' statistics
(the recursive integration of Armitage, McPherson & Rowe 1969, in Jennison & Turnbull,
"Group Sequential Methods", ch. 19), not by summing increments. Early looks are strict (3 runs of
at most 5: 0.011), the last look near the nominal level (0.045), and the chance of a false
decision over all the looks is 0.05 for a normal statistic. The planned last look is what the
run budget can buy (farm/analysis/plan.py `planned_looks`), fixed before any data: a sweep that
stops before it spends less than 0.05, never more. Only the looks' run counts enter, not the
data, so a resumed sweep, a report and the pass plan all compute the same levels.

The same level serves both halves of a decision: a difference (Welch p < alpha, Holm) and an
equivalence (TOST: the ratio's 1 - 2 alpha interval inside the margin), at every look.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache
from statistics import NormalDist

FAMILY_ALPHA = 0.05        # significance level of a sweep with a fixed number of repeats
AUTO_FIRST_PASS = 3        # repeats of the first pass of `--repeats auto`
AUTO_STEP = 2              # repeats added to the leader and each undecided trial, per later pass
AUTO_MAX_PASSES = 5        # looks at the data, first pass included
AUTO_BUDGET_FACTOR = 3     # default run budget: this many times the first pass


def is_auto(repeats: int | str) -> bool:
    return repeats == "auto"


def first_pass_repeats(repeats: int | str) -> int:
    """Repeats of the first (or only) pass: the number itself, or `AUTO_FIRST_PASS` for 'auto'."""
    return AUTO_FIRST_PASS if is_auto(repeats) else int(repeats)


def auto_looks(looks: int = AUTO_MAX_PASSES, first: int = AUTO_FIRST_PASS, step: int = AUTO_STEP) -> tuple[int, ...]:
    """Runs each a trial has at each look of `--repeats auto` planned to `looks` looks: 3, 5, 7, ..."""
    return tuple(first + step * k for k in range(max(1, looks)))


def obf_spent(t: float, alpha: float = FAMILY_ALPHA) -> float:
    """Alpha spent by information fraction `t` (0 < t <= 1): the O'Brien-Fleming-type spending function."""
    if t <= 0:
        return 0.0
    if t >= 1:
        return alpha
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return 2 * (1 - NormalDist().cdf(z / math.sqrt(t)))


@lru_cache(maxsize=64)
def look_alphas(looks: tuple[int, ...], alpha: float = FAMILY_ALPHA) -> tuple[float, ...]:
    """Two-sided nominal level of each look of a group-sequential test whose looks have `looks` runs
    each (increasing; the last is the planned maximum), spending `alpha` by `obf_spent`.

    Each look's boundary c_k solves P(no earlier look crossed, |Z_k| >= c_k) = alpha(t_k) -
    alpha(t_k-1) for the standardized statistics of a Brownian motion observed at t_k = n_k / n_K;
    the nominal level is 2 - 2 Phi(c_k). The density of the statistic that has not yet stopped is
    carried on a grid from look to look (Simpson's rule), each new look's exit probability in closed
    form. Each level is rounded down to three significant digits (a report prints it). Deterministic;
    cached (a sweep asks for a handful of designs)."""
    import numpy as np
    from scipy.special import ndtr, ndtri  # function level: scipy stays off `farm --help`'s path

    if not looks:
        return ()
    if any(b <= a for a, b in zip(looks, looks[1:])) or looks[0] <= 0:
        raise ValueError(f"looks must be increasing positive run counts, got {looks}")
    ts = [n / looks[-1] for n in looks]
    out: list[float] = []
    grid = weights = density = None  # the not-yet-stopped statistic S_k = Z_k sqrt(t_k) on a grid
    previous_t = 0.0
    for k, t in enumerate(ts):
        target = obf_spent(t, alpha) - obf_spent(previous_t, alpha)
        if k == 0:
            c = float(ndtri(1 - target / 2))
        else:
            sd = math.sqrt(t - previous_t)

            def exit_mass(c: float) -> float:
                b = c * math.sqrt(t)
                return float(np.sum(weights * density * (ndtr((-b - grid) / sd) + 1 - ndtr((b - grid) / sd))))

            lo, hi = 0.0, 40.0
            if exit_mass(hi) >= target:  # nothing left to spend at this look
                c = math.inf
            else:
                for _ in range(80):
                    mid = (lo + hi) / 2
                    lo, hi = (mid, hi) if exit_mass(mid) > target else (lo, mid)
                c = hi
        out.append(_floor3(float(2 * (1 - ndtr(c)))) if math.isfinite(c) else 0.0)
        # carry the density of S_k on (-b_k, b_k) to the next look
        b = (c if math.isfinite(c) else 10.0) * math.sqrt(t)
        points = 801  # odd: Simpson's rule
        new_grid = np.linspace(-b, b, points)
        new_weights = np.full(points, 2.0)
        new_weights[1::2] = 4.0
        new_weights[0] = new_weights[-1] = 1.0
        new_weights *= (2 * b / (points - 1)) / 3
        if k == 0:
            new_density = np.exp(-new_grid ** 2 / (2 * t)) / math.sqrt(2 * math.pi * t)
        else:
            sd = math.sqrt(t - previous_t)
            kernel = np.exp(-((new_grid[:, None] - grid[None, :]) / sd) ** 2 / 2) / (sd * math.sqrt(2 * math.pi))
            new_density = kernel @ (weights * density)
        grid, weights, density, previous_t = new_grid, new_weights, new_density, t
    return tuple(out)


def auto_design(counts: Iterable[int], runs: int, max_runs: int | None,
                budget_factor: int = AUTO_BUDGET_FACTOR, first_pass: int = AUTO_FIRST_PASS) -> tuple[int, int]:
    """(look, looks): which look of `--repeats auto` a sweep's runs are at, and how many looks its run
    budget plans, from the runs each ranked trial has on the primary profile (`counts`) and every
    run the sweep made (`runs`, all profiles, first pass included).

    The look is the number of planned looks (3, 5, 7, ... runs each) the most-measured trial has
    reached: the leader runs again at every pass. The planned looks are those the budget could buy
    at the least (the leader and one other trial, `AUTO_STEP` runs each a pass, one profile), at
    most `AUTO_MAX_PASSES`: a budget of 10 runs for two trials plans looks at 3 and 5 runs each.
    The budget is `max_runs`, else `budget_factor` times the first pass (farm/analysis/plan.py's
    default); the first pass's runs are `runs` less the later passes' (the primary profile's runs
    beyond the first pass's `first_pass` runs each), so every look computes the same plan.
    `first_pass`: the primary profile's runs each in the first pass (`AUTO_FIRST_PASS`, or more
    where a block's `profile_repeats` asks more): a first pass of 5 runs each is the first look, not
    the second."""
    counts = [int(c) for c in counts]
    most = max(counts, default=0)
    first_pass = max(1, int(first_pass))
    look = 1 + max(0, math.ceil((most - first_pass) / AUTO_STEP))
    first = runs - sum(max(0, c - first_pass) for c in counts)
    budget = max_runs if max_runs is not None else budget_factor * first
    affordable = max(0, budget - first) // (2 * AUTO_STEP)
    looks = max(1, min(AUTO_MAX_PASSES, 1 + affordable))
    return min(look, looks), looks


def _floor3(x: float) -> float:
    """Three significant digits, rounded down (never above the level solved): reports print it as is."""
    if x <= 0:
        return 0.0
    scale = 10 ** (2 - math.floor(math.log10(x)))
    return math.floor(x * scale) / scale


def alpha_for(repeats: int | str, look: int = 1, looks: int = AUTO_MAX_PASSES,
              first_pass: int = AUTO_FIRST_PASS) -> float:
    """Significance level of a sweep's verdicts: `FAMILY_ALPHA` with a fixed number of repeats; for
    'auto', the nominal level of look `look` of a sweep planned to `looks` looks (`look_alphas`),
    the first at `first_pass` runs each."""
    if not is_auto(repeats):
        return FAMILY_ALPHA
    levels = look_alphas(auto_looks(looks, first=max(1, int(first_pass))))
    return levels[min(max(look, 1), len(levels)) - 1]


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
