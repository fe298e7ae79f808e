"""What the lent H200 measured (bench/h200/) stays reproducible: `farm analyze` turns the committed
results file into the committed report and its appendix, and every run in it carries its provenance."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_farm

H200 = Path(__file__).resolve().parents[3] / "bench" / "h200"


def test_farm_analyze_reproduces_the_committed_report(tmp_path):
    out = run_farm("analyze", "--results", "bench/h200/results.json", "--config", "configs/h200-dummy.yaml",
                   "--format", "markdown")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (H200 / "report.md").read_text()
    # --out writes the same report, and the appendix it links (every trial's row, every run's figures)
    written = run_farm("analyze", "--results", "bench/h200/results.json", "--config", "configs/h200-dummy.yaml",
                       "--format", "markdown", "--out", str(tmp_path))
    assert written.returncode == 0, written.stderr
    assert (tmp_path / "report.md").read_text() == out.stdout == written.stdout
    assert (tmp_path / "appendix.md").read_text() == (H200 / "appendix.md").read_text()
    assert "[appendix.md](appendix.md)" in out.stdout and "(plots/total_tps_by_profile.png)" in out.stdout
    # the seed's numbers beside farm's, and the dummy-weights caveat, are part of it
    assert "## Against the seed" in out.stdout and "Dummy weights: the real architecture" in out.stdout
    # both engines' sweeps, set against each other with the limits each ran under
    assert "## Engines profile by profile" in out.stdout
    assert "| throughput | defaults | vllm (engine_vllm_default) |" in out.stdout


def test_every_measured_run_carries_its_provenance():
    runs = json.loads((H200 / "results.json").read_text())["runs"]
    assert runs, "no runs in bench/h200/results.json"
    never_started = [r for r in runs if r["status"] == "not_measurable"]
    # the MTP trial on random weights: recorded with its reason, never started, so no GPU or engine in it
    assert {r["name"] or r["trial"] for r in never_started} <= {"step_spec_decoding_mtp4"}
    assert all("gpu" not in r["provenance"] and "dummy weights" in r["reason"] for r in never_started)
    for run in runs:
        if run in never_started:
            continue
        prov = run["provenance"]
        assert prov["gpu"] == "NVIDIA H200" and prov["weights"] == "dummy", run["id"]
        version = {"vllm": "0.20.2", "sglang": "0.5.16"}[run["engine"]]
        assert prov["engine_version"] == version and prov["client_version"].startswith("guidellm 0.8"), run["id"]
        if "engine_start_s" not in prov:
            # a later pass's run, stored before a pass kept its own engine start: none is filled in
            assert "start_phases" not in prov and "engine_start_cold" not in prov, run["id"]
            assert any("engine_start_s" in r["provenance"] for r in runs if r["trial"] == run["trial"]), run["id"]
            continue
        assert prov["engine_start_s"] > 0, run["id"]
        # SGLang's first trial ran before farm kept SGLang's compile caches: whether it started
        # cold was not known then, and is not filled in now
        assert isinstance(prov.get("engine_start_cold"), bool) or run["engine"] == "sglang", run["id"]
        assert run["node"] and run["status"] in ("ok", "engine_failed_to_start", "engine_crashed", "oom",
                                                 "invalid_flags", "timeout", "low_success_rate", "bench_failed",
                                                 "same_server")
        if run["status"] == "same_server":
            # started, found to be the default's server by its log, stopped: no number of its own
            assert not run["metrics"].get("total_tps") and "the same server as engine_sglang_default" in run["reason"]
