"""ray-cluster.yaml passes the checks `ray up` makes before it touches a node: Ray's own config
preparation for on-premises clusters, its JSON schema (`validate_config`), and the provider's
bootstrap, here with nothing cached or contacted."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "ray-cluster.yaml"


def _config() -> dict:
    return yaml.safe_load(CONFIG.read_text())


def test_ray_cluster_yaml_passes_rays_validation():
    from ray.autoscaler._private.commands import _bootstrap_config
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(_config())
    validate_config(prepared)
    resolved = _bootstrap_config(_config(), no_config_cache=True)  # what `ray up` runs first
    node_type = resolved["available_node_types"]["local.cluster.node"]
    assert node_type["min_workers"] == node_type["max_workers"] == 2  # every listed worker joins


def test_an_unknown_key_is_refused_by_the_same_validation():
    import jsonschema
    import pytest
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = _config()
    config["worker_start_ray_command"] = []  # a typo of worker_start_ray_commands
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(config))


def test_every_node_runs_farm_and_the_engines_from_their_own_environments():
    config = _config()
    assert config["provider"]["type"] == "local" and config["provider"]["head_ip"]
    setup = "\n".join(config["setup_commands"])
    for venv in ("/opt/venvs/farm", "/opt/venvs/vllm", "/opt/venvs/sglang"):
        assert f"python3 -m venv {venv}" in setup
    assert "pip install -q -e ~/farm" in setup
    head = " ".join(config["head_start_ray_commands"])
    workers = " ".join(config["worker_start_ray_commands"])
    assert "--dashboard-port=8265" in head and "--dashboard-host=0.0.0.0" in head
    for start in (head, workers):
        assert "RAY_AUTH_MODE=token" in start and "--num-gpus=8" in start and "--metrics-export-port=" in start
        assert "source /opt/venvs/farm/bin/activate" in start  # the job's `python` is farm's
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"
    assert ".venv" in config["rsync_exclude"]
