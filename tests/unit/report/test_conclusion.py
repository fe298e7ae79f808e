"""The Conclusion tells the truth first (issue 45): the recommended command, then one line per
decision, and never a recommendation another section shows significantly slower, left unsaid.
On the committed H200 runs (bench/h200/results.json), whose old report concluded "tie;
recommended engine_vllm_default" while its own throughput section showed step3 +20.1 % over it."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.analysis.results_file import read_results_file
from farm.analysis.select import settings_for
from farm.report import build_report, render, report_for
from farm.report.checks import gains_over_recommended
from farm.report.text import conclusion_decisions
from farm.study.load import load_study
from farm.study.repeats import alpha_for

REPO = Path(__file__).resolve().parents[3]


def conclusion(text: str) -> str:
    return text.split("## Conclusion", 1)[1].split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def h200():
    results = read_results_file(REPO / "bench/h200/results.json")
    return report_for(results, load_study(REPO / "configs/h200-dummy.yaml"))


def test_the_conclusion_gives_the_command_then_one_line_per_decision(h200):
    text = conclusion(render(h200, "markdown"))
    sel = h200.selection
    command_at, decisions_at = text.index("```"), text.index("Decisions (")
    assert command_at < decisions_at < text.index("Benchmarks before and after")
    v = sel.verdict()
    judged = [s for s in sel.steps if s.delta is not None]
    lines = conclusion_decisions(h200)
    assert len(lines) == len(v.comparisons) + len(judged) >= 4
    for line in lines:
        assert f"- {line.replace('`', '')}" in text.replace("`", "")
    # every one of these H200 decisions is open, and says what would close it
    assert all("cannot tell yet" in line and "more runs each" in line for line in lines)
    assert "tie" not in text.replace("`", "")  # "tie" is no claim the data support


def test_the_old_h200_conclusion_would_now_have_to_say_what_it_hid(h200):
    # The committed report recommended the engine's defaults. With that recommendation, the
    # throughput section's step3 +20 % over it must be in the Conclusion, with its interval.
    sel = h200.selection
    default = sel.baseline
    assert default.name == "engine_vllm_default" and sel.recommended.trial != default.trial
    old = h200.model_copy(update={"selection": sel.model_copy(update={"recommended": default})})
    gains = {(g.profile, g.trial) for g in gains_over_recommended(old.selection)}
    step3 = next(t.id for t in sel.trials if t.name == "step3_performance_mode")
    assert ("throughput", step3) in gains
    line = next(x for x in conclusion_decisions(old) if x.startswith("throughput"))
    assert "step3_performance_mode is better than engine_vllm_default: +20" in line
    assert "better than the recommended engine_vllm_default here" in line
    assert line.replace("`", "") in conclusion(render(old, "markdown")).replace("`", "")


def test_a_recommendation_slower_than_another_on_its_own_profile_is_a_checked_contradiction(h200):
    # Were SGLang's defaults recommended, "Engines profile by profile" shows vLLM's defaults +85 % over
    # them on the primary profile, decided: the check flags it and the Conclusion says it.
    from farm.report.checks import check_contradiction

    sel = h200.selection
    sglang = next(t for t in sel.trials if t.name == "engine_sglang_default")
    chosen = sel.baseline.model_copy(update={"trial": sglang.id, "name": sglang.name, "engine": "sglang"})
    forced = h200.model_copy(update={"selection": sel.model_copy(update={"recommended": chosen})})
    [w] = check_contradiction(forced.selection, forced.results)
    assert w.profile == sel.primary_profile and "engine_vllm_default" in w.message and "Engines profile" in w.message
    line = next(x for x in conclusion_decisions(forced) if "Engines profile by profile" in x)
    assert line.startswith(sel.primary_profile)
    assert "engine_vllm_default is better than engine_sglang_default: +8" in line
    assert "on the profile it was chosen for" in line
    # the H200 report's own recommendation, the leader, has no such line and no such warning
    assert not check_contradiction(sel, h200.results)


def test_no_section_of_the_h200_report_shows_a_decided_gain_over_its_recommendation(h200):
    assert gains_over_recommended(h200.selection) == []
    assert not [w for w in h200.warnings if w.code == "contradiction"]


def test_repeats_auto_reports_the_per_look_alpha_for_equivalence_too():
    results = read_results_file(REPO / "bench/h200/results.json")
    study = load_study(REPO / "configs/h200-dummy.yaml").model_copy(update={"repeats": "auto"})
    settings = settings_for(results, study)
    text = render(build_report(results, settings), "markdown")
    # 3 runs each on the primary profile: the first of the five looks the default budget plans,
    # judged at its own (strict) level, the equivalence's interval too
    assert settings.alpha == alpha_for("auto", 1, 5) < 0.01
    assert f"equivalent: the {(1 - 2 * settings.alpha) * 100:g} % interval of the ratio inside ±3 %" in text
    assert "stops when every decision is made" in text and "\u03b1-spending" in text
