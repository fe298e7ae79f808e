"""`--price ACCELERATOR=USD` on farm analyze, farm report and farm sweep, and the study's `prices` (issue 50):
bad input is one line naming the option or key, exit 2; a price reaches the report, a Ray job's entrypoint and
the stored study."""

from __future__ import annotations

from click.testing import CliRunner

from conftest import REPO
from farm.cli.main import cli
from farm.run.jobs import SweepArgs

H200 = ["--results", str(REPO / "bench/h200/results.json"), "--config", str(REPO / "configs/h200-dummy.yaml")]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_analyze_prices_the_report_at_the_given_price():
    res = invoke("analyze", *H200, "--price", "H200=3.5", "--price", "H100=2")
    assert res.exit_code == 0, res.output
    assert "at H200 $3.5, H100 $2 per GPU-hour: recommended $0.08444" in res.stdout
    plain = invoke("analyze", *H200)
    assert "Costs are not computed: no price given" in plain.stdout


def test_a_bad_price_is_one_line_and_exit_2():
    for command in (["analyze", *H200], ["report", "0" * 32], ["sweep", "--grid", "smoke", "--dry-run"]):
        res = invoke(*command, "--price", "H200=free")
        assert res.exit_code == 2, res.output
        assert res.output.strip().splitlines() == [
            "error: --price: expected dollars per GPU-hour above 0 and at most 10,000, got 'free'"]


def test_a_bad_price_in_the_study_names_its_key(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(f"include: {REPO / 'configs/smoke.yaml'}\nname: priced\nprimary_profile: smoke_chat\nprices: {{H100: -2.5}}\n")
    res = invoke("sweep", "--config", str(study), "--grid", "smoke", "--dry-run")
    assert res.exit_code == 2
    assert res.output.strip() == (f"error: {study}: prices.H100: expected dollars per GPU-hour above 0 and at most "
                                  "10,000, got '-2.5'")


def test_a_ray_job_gets_the_prices_again():
    args = SweepArgs(grid="full", tracking_uri="http://mlflow:5000", prices=(("H200", 3.5), ("H100", 2.0)))
    assert args.entrypoint().endswith("--price H200=3.5 --price H100=2.0")
