"""TPOT means what vLLM, SGLang and AIPerf mean by it: (latency - TTFT) / (output tokens - 1).
guidellm 0.8.1's `time_per_output_token_ms` (latency over all output tokens, first included) is
kept under a name that says so; sweeps stored before the change read with the new meanings."""

from __future__ import annotations

import io
import json
import tarfile

from conftest import REPO
from farm.analysis.capacity import slo_misses
from farm.analysis.results import TrialResult, parse_report
from farm.analysis.results_file import read_results_file
from farm.report.checks import check_tpot
from farm.report.models import TPOT_TOLERANCE
from farm.study.sections import SLOSpec

REPORT = REPO / "tests/fixtures/guidellm-0.8.1-mock-report.json"


def _guidellm_means() -> dict:
    raw = json.loads(REPORT.read_text())["benchmarks"][-1]["metrics"]
    return {k: raw[k]["successful"]["mean"] for k in ("time_per_output_token_ms", "inter_token_latency_ms",
                                                       "time_to_first_token_ms", "request_latency")}


def test_tpot_is_the_time_per_token_after_the_first():
    metrics, _ = parse_report(REPORT.read_text())
    raw = _guidellm_means()
    assert metrics.tpot_mean_ms == raw["inter_token_latency_ms"]
    assert metrics.latency_per_output_token_mean_ms == raw["time_per_output_token_ms"]
    n = metrics.total_output_tokens / metrics.successful_requests
    implied = (metrics.latency_mean_s * 1000 - metrics.ttft_mean_ms) / (n - 1)
    # the mock ends its stream a little after its last token: 4 % here, 0.01 % on the H200
    assert abs(metrics.tpot_mean_ms - implied) / implied < TPOT_TOLERANCE
    # guidellm's figure carries the first token's wait: on this run (TTFT 149 ms) half as much again
    assert metrics.latency_per_output_token_mean_ms > 1.4 * metrics.tpot_mean_ms


def test_a_slow_first_token_passes_a_tpot_gate_that_guidellms_figure_fails():
    metrics, _ = parse_report(REPORT.read_text())
    m = metrics.model_dump(exclude_none=True)
    assert m["ttft_mean_ms"] > 100 and m["tpot_mean_ms"] < 10 < m["latency_per_output_token_mean_ms"]
    assert slo_misses(m, SLOSpec(tpot_mean_ms_max=10), floor=0.9) == []
    missed = slo_misses(m, SLOSpec(latency_per_output_token_mean_ms_max=10), floor=0.9)
    assert [x.limit for x in missed] == ["mean latency per output token"]


def _stored_h200_result() -> dict:
    """A trial result the H200 stored before the change (the store holds later ones too)."""
    with tarfile.open(REPO / "bench/h200/store.tgz") as tar:
        for member in tar.getmembers():
            if member.name.endswith("/result.json"):
                raw = json.load(io.TextIOWrapper(tar.extractfile(member)))
                if raw["schema_version"] == 1:
                    return raw
    raise AssertionError("bench/h200/store.tgz holds no result of schema 1")


def test_a_result_stored_before_the_change_reads_with_the_fields_tpot():
    raw = _stored_h200_result()
    run = next(r for r in raw["runs"] if r["metrics"])
    old = run["metrics"]
    result = TrialResult.model_validate(raw)
    new = next(r for r in result.runs if r.profile == run["profile"] and r.repeat == run["repeat"]).metrics
    assert new.tpot_mean_ms == old["itl_mean_ms"] and new.tpot_p95_ms == old["itl_p95_ms"]
    assert new.latency_per_output_token_mean_ms == old["tpot_mean_ms"]
    assert result.schema_version == 2


def test_a_results_file_of_the_older_format_reads_with_the_fields_tpot(tmp_path):
    data = json.loads((REPO / "tests/fixtures/seed-results.json").read_text())
    run = dict(data["runs"][0], metrics=dict(data["runs"][0]["metrics"]))
    run["metrics"].update(tpot_mean_ms=80.0, itl_mean_ms=70.0)
    for version, tpot, per_token in ((1, 70.0, 80.0), (None, 80.0, None)):
        data_v = {**data, "runs": [run]}
        if version is not None:
            data_v["schema_version"] = version
        path = tmp_path / f"v{version}.json"
        path.write_text(json.dumps(data_v))
        m = read_results_file(path).records[0].metrics
        # farm's own older file is migrated; a file of another client (the seed's) says what it says
        assert m["tpot_mean_ms"] == tpot and m.get("latency_per_output_token_mean_ms") == per_token


def test_the_consistency_check_holds_on_the_h200_runs_and_fires_on_the_seeds_vllm_rows():
    h200 = read_results_file(REPO / "bench/h200/results.json")
    fixed = {p: info.output_tokens for p, info in h200.profiles.items()}
    assert not [w for rec in h200.records if rec.measured for w in check_tpot(rec, fixed.get(rec.profile))]
    seed = read_results_file(REPO / "tests/fixtures/seed-results.json")
    flagged = {(rec.id, rec.profile): w.message for rec in seed.records if rec.measured
               for w in check_tpot(rec, seed.profiles[rec.profile].output_tokens)}
    vllm_sharegpt = [k for k in flagged if k[1] == "sharegpt" and "sglang" not in k[0] and "mtp" not in k[0]]
    assert len(vllm_sharegpt) == 5
    msg = flagged[("final_baseline_generation_heavy", "generation_heavy")]
    assert "2.48 ms" in msg and "27.77 ms" in msg and "too small for the run's own latency" in msg


def test_every_per_run_check_fires_on_real_anomalies_of_the_seed_and_none_on_the_h200_runs():
    """Each check code of a run: a fixture from real data where it must fire (the seed's own
    numbers), and the committed H200 runs, where none must."""
    from farm.report.build import report_for
    from farm.study.load import load_study

    per_run = {"rate_mismatch", "tpot_inconsistent", "itl_zero"}
    seed = report_for(read_results_file(REPO / "tests/fixtures/seed-results.json"), load_study())
    assert per_run <= {w.code for w in seed.warnings}
    h200 = report_for(read_results_file(REPO / "bench/h200/results.json"), load_study(REPO / "configs/h200-dummy.yaml"))
    assert not per_run & {w.code for w in h200.warnings}, [w.message for w in h200.warnings if w.code in per_run]
    assert len([n for n in h200.notes if "peak output rate" in n]) == 1  # a note, said once


def _record(report, profile="generation"):
    from farm.analysis.records import RunRecord

    metrics, _ = parse_report(report.read_text())
    return RunRecord(id="r", trial="t", engine="vllm", model="m", flags={}, profile=profile,
                     metrics=metrics.model_dump(exclude_none=True))


def test_a_run_whose_client_timed_every_token_is_told_apart_from_one_that_timed_fewer():
    # A real vLLM CPU run (2 loaded cores, 16 streams of 128 tokens): every token was timed (64 x
    # 127 gaps), and the requests ended ~0.4 s after their last token; not a client that missed tokens.
    rec = _record(REPO / "tests/fixtures/guidellm-0.8.1-vllm-cpu-report.json")
    assert rec.metrics["timed_token_gaps"] == 64 * 127
    (w,) = check_tpot(rec, 128)
    assert "timed every token (8128 gaps)" in w.message and "after their last token" in w.message
    assert "reasoning" not in w.message
    # the same run had its client timed half the tokens: the other explanation, with the count
    rec.metrics["timed_token_gaps"] = 64 * 127 / 2
    (w,) = check_tpot(rec, 128)
    assert "timed fewer tokens than the run generated (it timed 4064 token gaps of 8128)" in w.message
    # a run stored before farm kept the count (the seed's, older sweeps): both causes, said as such
    del rec.metrics["timed_token_gaps"]
    (w,) = check_tpot(rec, 128)
    assert "this run does not say how many tokens its client timed" in w.message
