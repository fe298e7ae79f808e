"""configs/h200-dummy.yaml's grids for the machines of several GPUs (issue "Several GPUs"): what
they would run, and that no engine there may use NVLink multicast."""

from pathlib import Path

import pytest

from farm.study.grid import expand
from farm.study.load import load_study

STUDY = Path(__file__).resolve().parents[3] / "configs" / "h200-dummy.yaml"


@pytest.fixture(scope="module")
def study():
    return load_study(STUDY)


def test_the_tp_grid_has_tp1_tp2_dp2_and_expert_parallel_vllm_trials_on_two_profiles(study):
    trials = expand(study, "tp")
    assert {t.engine for t in trials} == {"vllm"}
    layouts = {(t.knobs.get("tensor_parallel", 1), t.knobs.get("data_parallel", 1), bool(t.knobs.get("expert_parallel")))
               for t in trials}
    assert layouts == {(1, 1, False), (2, 1, False), (2, 1, True), (1, 2, False), (1, 2, True)}
    assert max(t.gpus for t in trials) == 2
    assert all(t.profiles == ["throughput", "long_context"] for t in trials)
    # two TP1 trials may run at once, one per GPU of nvidia-h200-x2
    assert sum(t.gpus == 1 for t in trials) >= 2 and study.grids["tp"].max_concurrent_trials == 2


def test_the_busy_grid_has_at_least_twice_as_many_tp1_trials_as_eight_gpus(study):
    trials = expand(study, "busy")
    assert len(trials) >= 16 and all(t.gpus == 1 for t in trials)


def test_no_engine_of_the_h200_study_may_use_nvlink_multicast(study):
    for name, engine in study.engines.items():
        env = engine.env
        assert (env.get("NCCL_NVLS_ENABLE"), env.get("TORCH_SYMM_MEM_DISABLE_MULTICAST"),
                env.get("NVSHMEM_DISABLE_NVLS")) == ("0", "1", "1"), name
