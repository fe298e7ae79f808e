"""`accelerator_type: auto` (farm/analysis/accelerator.py): the one GPU model of the cluster's nodes
(their Ray resources, as `ray.nodes()` gives them), or of a results file's runs; several models or
none named is one line naming `--accelerator`."""

from __future__ import annotations

import pytest

from farm.analysis import accelerator as acc
from farm.errors import UserError
from farm.study.grid import expand
from farm.study.load import load_study
from sweeptools import write_study

HEAD = {"CPU": 4.0, "memory": 1e9, "node:127.0.0.1": 1.0, "node:__internal_head__": 1.0}


def h(model: str, gpus: float = 8.0) -> dict:
    return {"CPU": 16.0, "GPU": gpus, f"accelerator_type:{model}": 1.0, "memory": 1e9}


@pytest.mark.parametrize("nodes, name", [
    ([h("H100")], "H100"),
    ([HEAD, h("H100"), h("H100", 4)], "H100"),  # a head without GPUs names none and counts for nothing
    ([h("RTX-PRO-6000")], "RTX-PRO-6000"),
])
def test_the_one_gpu_model_of_the_cluster(nodes, name):
    assert acc.cluster_accelerator(nodes) == name


def test_several_models_are_refused_naming_them_and_the_option():
    with pytest.raises(UserError) as err:
        acc.cluster_accelerator([h("H200"), HEAD, h("H100")])
    line = err.value.line()
    assert line.startswith("accelerator_type: auto: the cluster has GPUs of several models (H100, H200)")
    assert "--accelerator NAME" in line and "\n" not in line


def test_a_model_named_only_by_a_node_without_gpus_is_not_the_clusters():
    with pytest.raises(UserError, match="several"):
        acc.cluster_accelerator([h("H100"), {**HEAD, "accelerator_type:A100": 1.0}, h("H200", 1)])
    assert acc.cluster_accelerator([h("H100"), {**HEAD, "accelerator_type:A100": 1.0}]) == "H100"


@pytest.mark.parametrize("nodes, why", [
    ([HEAD], "no node of the cluster has GPUs"),
    ([], "no node of the cluster has GPUs"),
    ([HEAD, {"CPU": 8.0, "GPU": 2.0}], "the cluster's GPU nodes name no GPU model"),
])
def test_none_named_is_one_line_naming_the_option(nodes, why):
    with pytest.raises(UserError) as err:
        acc.cluster_accelerator(nodes)
    assert why in err.value.line() and "--accelerator NAME" in err.value.line()


@pytest.mark.parametrize("driver, ray", [
    ("NVIDIA H200", "H200"),
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000"),
])
def test_a_driver_gpu_name_reads_as_ray_names_it(driver, ray):
    assert acc.ray_name(driver) == ray


def test_a_results_file_names_its_gpu_model_only_when_its_runs_agree():
    assert acc.recorded_accelerator(["NVIDIA H200", None, "NVIDIA H200, NVIDIA H200"]) == "H200"
    assert acc.recorded_accelerator(["NVIDIA H200", "NVIDIA H100 80GB HBM3"]) is None
    assert acc.recorded_accelerator([None]) is None


STUDY = dict(name="gpus", grid="g", blocks=[{"engine": "mock", "models": ["tiny"], "axes": {"gpus": [0, 1]}}])


def test_auto_is_replaced_where_the_study_and_its_engines_say_it(tmp_path):
    study = load_study(write_study(tmp_path / "s.yaml", accelerator_type="auto", **STUDY))
    trials = expand(study, "g")
    assert acc.auto_engines(study, trials) == {"mock"} and acc.gpu_models(study, trials) == []
    # only the GPU trials wait for the cluster: a grid of CPU trials resolves nothing
    assert acc.auto_engines(study, [t for t in trials if not t.gpus]) == set()
    ran = acc.resolved(study, "H100")
    assert ran.accelerator_type == "H100" and ran.engines["mock"].accelerator_type == "H100"
    assert acc.gpu_models(ran, trials) == ["H100"] and not acc.auto_engines(ran, trials)
    assert study.engines["mock"].accelerator_type == "auto"  # the study read stays as it was


def test_an_engines_own_name_stays_and_the_option_overrides_both(tmp_path):
    study = load_study(write_study(tmp_path / "s.yaml", accelerator_type="auto",
                                   engine={"accelerator_type": "A100"}, **STUDY))
    trials = expand(study, "g")
    assert not acc.auto_engines(study, trials) and acc.says_auto(study)
    assert acc.resolved(study, "H100").engines["mock"].accelerator_type == "A100"
    forced = acc.with_accelerator(study, "H200")
    assert forced.accelerator_type == "H200" and forced.engines["mock"].accelerator_type == "H200"
    assert acc.auto_engines(acc.with_accelerator(study, "auto"), trials) == {"mock"}
