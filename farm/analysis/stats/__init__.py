"""Statistics for benchmark repeats: intervals, relative differences, Holm, decisions.

Pure: numpy, scipy and pydantic only (no ray, no mlflow), so selection can be recomputed from
stored results at any time. Every function takes plain numbers (the samples of one metric, one
value per repeat) and returns a pydantic model that says what it could and could not tell.

Conventions
-----------
- A *relative difference* is ``mean_a / mean_b - 1`` (``+0.10`` = a is 10 % above b).
- Non-finite samples (NaN, inf, ``None``) are dropped and counted (``n_dropped``), never
  silently averaged in. A failed run should not reach this module as a number at all; the count
  makes it visible when one does.
- One run gives a mean but no interval and no test: results then say ``cannot_tell``.
- ``method="log"`` (what selection's decisions use): throughput lives on a ratio scale, so the
  test is Welch's on log(throughput): the difference of the log means is the log of the ratio
  of the geometric means, and its interval, back-transformed, is the ratio's. A comparison then
  *decides* (``decide``): ``better`` / ``worse`` (Holm-adjusted p < alpha), ``equivalent`` (TOST:
  the (1 - 2 alpha) interval of the ratio inside [1/(1+m), 1+m], m the study's margin, 3 % by
  default: symmetric on the log scale, so "a is the same as b" is "b is the same as a"), or
  ``undecided``, with the runs per side at which the current noise would decide it.
- Machines as blocks (``blocked_difference``, farm/analysis/stats/blocks.py): each side's runs by
  machine; compared within the machines both ran on, across machines only through a control that
  ran on each, and never decided from runs of different machines pooled.
- ``method="welch"`` (default): Welch's t-test for the p-value and Fieller's interval for the
  ratio of means, both with the Welch–Satterthwaite degrees of freedom. At ratio 1 Fieller's
  statistic *is* Welch's t, so the interval excludes "no difference" exactly when p < 1 -
  confidence: the interval and the p-value never contradict each other.
- ``method="bootstrap"``: a seeded percentile bootstrap of the ratio of means (each side
  resampled on its own). The p-value is still Welch's. With 3 to 5 repeats the bootstrap
  interval is too narrow (a sample of 3 has only 10 distinct resamples); prefer Welch there.
- Both sides with zero variance (every repeat identical): equal constants are "no difference"
  (p = 1); different constants are significant (p = 0), because Welch's statistic grows without
  bound as both variances shrink with the difference fixed, and repeated identical
  measurements are the strongest evidence a benchmark can give that the difference is the
  measurement's and not noise. (This needs n >= 2 on both sides; a metric rounded so coarsely
  that its noise vanishes would be over-trusted, and the note on the result says why it was
  called.)
"""


from farm.analysis.stats.blocks import UNKNOWN, Blocked, Control, blocked_difference
from farm.analysis.stats.difference import Diff, relative_difference
from farm.analysis.stats.edges import EdgeWarning, edge_warnings, pareto_front
from farm.analysis.stats.summary import Summary, summarize
from farm.analysis.stats.verdict import (DEFAULT_MARGIN, MAX_RUNS_EACH, Comparison, Decided, Decision, RankedCandidate, Verdict,
                                        compare_winner, decide, holm, leader_decisions)
from farm.analysis.stats.workloads import CrossProfileEntry, CrossProfileRanking, ProfileCost, worst_case_relative

__all__ = [
    "Summary",
    "Diff",
    "Comparison",
    "Decided",
    "Decision",
    "DEFAULT_MARGIN",
    "MAX_RUNS_EACH",
    "RankedCandidate",
    "Verdict",
    "ProfileCost",
    "CrossProfileEntry",
    "CrossProfileRanking",
    "EdgeWarning",
    "summarize",
    "relative_difference",
    "blocked_difference",
    "Blocked",
    "Control",
    "UNKNOWN",
    "holm",
    "compare_winner",
    "decide",
    "leader_decisions",
    "worst_case_relative",
    "pareto_front",
    "edge_warnings",
]
