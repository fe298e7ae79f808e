"""The quality gate's paired verdict (farm/analysis/quality.py) on tables whose answer is known."""

from __future__ import annotations

import math

import pytest
from scipy.stats import multinomial, norm

from farm.analysis.quality import (PairedCounts, _tango_statistic, agreement, mcnemar_exact_p, paired_counts,
                                   paired_verdict, tango_interval, verdict_from_counts)


def _runs(n: int, *, both: int, only_gated: int, only_reference: int) -> tuple[dict[str, bool], dict[str, bool]]:
    """Per-item correctness of a gated trial and its reference with the given paired table."""
    gated, reference = {}, {}
    for i in range(n):
        key = f"item-{i}"
        if i < both:
            gated[key] = reference[key] = True
        elif i < both + only_gated:
            gated[key], reference[key] = True, False
        elif i < both + only_gated + only_reference:
            gated[key], reference[key] = False, True
        else:
            gated[key] = reference[key] = False
    return gated, reference


def test_a_clearly_degraded_configuration_is_worse():
    # 80 % for the reference; the gated trial loses 30 of its right answers and gains 5.
    gated, reference = _runs(300, both=210, only_gated=5, only_reference=30)
    v = paired_verdict(gated, reference, margin=0.02)
    assert v.verdict == "worse"
    assert v.p_value < 0.001
    assert v.difference == pytest.approx(-25 / 300)
    assert v.accuracy == pytest.approx(215 / 300) and v.reference_accuracy == pytest.approx(240 / 300)
    assert v.why.startswith("worse: ")


def test_a_clearly_better_configuration_is_better_not_worse():
    gated, reference = _runs(300, both=210, only_gated=30, only_reference=5)
    assert paired_verdict(gated, reference, margin=0.02).verdict == "better"


def test_identical_answers_on_enough_items_are_equivalent():
    gated, reference = _runs(300, both=240, only_gated=0, only_reference=0)
    v = paired_verdict(gated, reference, margin=0.02)
    assert v.verdict == "equivalent"
    # Tango's interval does not collapse to a point when no pair is discordant: about z^2 / n.
    assert v.low == pytest.approx(-v.high) and 0.005 < v.high < 0.02


def test_identical_answers_on_few_items_cannot_tell():
    gated, reference = _runs(40, both=30, only_gated=0, only_reference=0)
    v = paired_verdict(gated, reference, margin=0.02)
    assert v.verdict == "cannot tell"
    assert v.high > 0.02


def test_a_few_symmetric_disagreements_on_few_items_cannot_tell():
    gated, reference = _runs(100, both=70, only_gated=4, only_reference=4)
    assert paired_verdict(gated, reference, margin=0.02).verdict == "cannot tell"


def test_a_small_loss_measured_on_many_items_is_still_worse():
    # 0.3 points lost, inside a 2-point margin, but significant: refused, not waved through.
    v = verdict_from_counts(PairedCounts(both=80_000, only_gated=1_000, only_reference=1_300, neither=17_700),
                            margin=0.02)
    assert -0.02 < v.low and v.high < 0.02
    assert v.verdict == "worse"


def test_a_wider_margin_makes_the_same_table_equivalent():
    counts = PairedCounts(both=230, only_gated=5, only_reference=7, neither=58)
    assert verdict_from_counts(counts, margin=0.02).verdict == "cannot tell"
    assert verdict_from_counts(counts, margin=0.05).verdict == "equivalent"


def test_mcnemar_exact_p_is_the_binomial_test_of_the_discordant_pairs():
    # 2 of 12 discordant pairs one way: two-sided exact binomial, 2 * P(X <= 2 | 12, 1/2).
    assert mcnemar_exact_p(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 2 ** 12)
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(5, 5) == 1.0


def test_tango_interval_of_a_published_example():
    # Fagerland, Lydersen and Laake (Stat Med 2014) worked example, Bentur et al. 2009: n12 = 1,
    # n21 = 7 of 21 pairs; Tango's 95 % asymptotic score interval -0.517 to -0.026.
    low, high = tango_interval(1, 7, 21, 0.95)
    assert (round(low, 3), round(high, 3)) == (-0.517, -0.026)


def test_the_interval_ends_are_where_the_score_statistic_reaches_z():
    z = norm.ppf(0.95)
    low, high = tango_interval(12, 30, 300, 0.90)
    assert _tango_statistic(low, 12, 30, 300) == pytest.approx(z, abs=1e-6)
    assert _tango_statistic(high, 12, 30, 300) == pytest.approx(-z, abs=1e-6)
    assert low < (12 - 30) / 300 < high


@pytest.mark.parametrize("p12,p21", [(0.02, 0.02), (0.05, 0.01), (0.10, 0.15)])
def test_the_interval_covers_the_true_difference_about_as_often_as_it_says(p12, p21):
    # Exact coverage over every table of 60 pairs (no simulation): a 90 % interval's coverage.
    n, truth = 60, p12 - p21
    covered = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            low, high = tango_interval(b, c, n, 0.90)
            if low <= truth <= high:
                covered += multinomial.pmf([b, c, n - b - c], n, [p12, p21, 1 - p12 - p21])
    assert 0.85 < covered < 0.96, covered


def test_the_runs_must_answer_the_same_items():
    gated, reference = _runs(30, both=20, only_gated=0, only_reference=0)
    reference.pop("item-0")
    with pytest.raises(ValueError, match="different items"):
        paired_counts(gated, reference)


def test_agreement_is_recorded_beside_the_verdict():
    gated, reference = _runs(300, both=240, only_gated=0, only_reference=0)
    first = ({k: "A" for k in gated}, {k: ("A" if i % 4 else "B") for i, k in enumerate(reference)})
    answers = ({k: "42" for k in gated}, {k: "42" for k in reference})
    v = paired_verdict(gated, reference, margin=0.02, first_tokens=first, answers=answers)
    assert v.first_token_agreement == pytest.approx(0.75)
    assert v.answer_agreement == 1.0
    assert paired_verdict(gated, reference, margin=0.02).first_token_agreement is None
    assert agreement({"a": "x"}, {"b": "x"}) is None


@pytest.mark.parametrize("kwargs", [{"margin": 0}, {"margin": 1.5}, {"margin": 0.02, "alpha": 0.6}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        verdict_from_counts(PairedCounts(both=1, only_gated=0, only_reference=0, neither=0), **kwargs)


def test_the_verdict_is_finite_at_the_edges():
    for counts in (PairedCounts(both=0, only_gated=0, only_reference=50, neither=0),
                   PairedCounts(both=0, only_gated=50, only_reference=0, neither=0),
                   PairedCounts(both=0, only_gated=0, only_reference=0, neither=50)):
        v = verdict_from_counts(counts, margin=0.02)
        assert math.isfinite(v.low) and math.isfinite(v.high) and -1 <= v.low <= v.difference <= v.high <= 1
