"""The sweep's summary (its MLflow note) lists the trials that were not measured apart from the
failures, each with its reason: on the H200's results, the MTP trial (not measurable on dummy
weights) and the two SGLang trials whose engine ran the default's server are not failed trials."""

from __future__ import annotations

from pathlib import Path

from farm.analysis.results_file import read_results_file
from farm.report import report_for, summary_markdown
from farm.study.load import load_study

ROOT = Path(__file__).resolve().parents[3]


def test_not_measured_trials_are_listed_apart_from_failures():
    study = load_study(ROOT / "configs" / "h200-dummy.yaml")
    report = report_for(read_results_file(ROOT / "bench" / "h200" / "results.json"), study, grid="seed")
    text = summary_markdown(report)
    head, _, rest = text.partition("**Not measured**")
    assert rest, text
    listed = rest.split("**Failed**", 1)[0]
    assert "`step_spec_decoding_mtp4`: not_measurable: not measurable on dummy weights" in listed
    # 256 and 512 with SGLang's radix cache on ran the default's server (2026-12-04)
    for asked in (256, 512):
        assert (f"`sglang_running_{asked}`: same_server: the engine ran the same server as engine_sglang_default: "
                f"max_running_requests: asked {asked}, got 79") in listed
    failed = rest.split("**Failed**", 1)[1].split("**GPU-hours**", 1)[0]
    assert "step_spec_decoding_mtp4" not in failed and "sglang_running_256`" not in failed
