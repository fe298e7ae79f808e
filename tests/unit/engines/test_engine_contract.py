"""What the `Engine` base class promises, held against every registered engine.

Parametrized over `farm.engines.ENGINES`, so an engine added to the registry is covered without
touching this file; it must also bring fixture logs of its own (tests/fixtures/engine-logs/,
named `<engine>-...`, each listed in SOURCES.md with what it should classify as). The
engine-specific behaviour (each engine's flags, what its logs report) is tested in
tests/unit/engines/test_engines_<engine>.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from farm.analysis.results import Status
from farm.engines import ENGINES, get_engine
from farm.engines.base import SECRET_MASK, Engine, Failure
from farm.study.spec import EngineSpec
from farm.study.trial import Trial

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "engine-logs"
NAMES = sorted(ENGINES)
FLAGS = {"contract-number": 7, "contract-switch": True, "contract-off": False, "contract-json": {"a": 1, "b": [2]}}


def _expected_logs() -> dict[str, str | None]:
    """fixture file -> expected status (None: healthy), from SOURCES.md's table."""
    out: dict[str, str | None] = {}
    for line in (LOGS / "SOURCES.md").read_text().splitlines():
        m = re.match(r"\| `([^`]+\.log)` \| (`(\w+)`|healthy)", line)
        if m:
            out[m.group(1)] = m.group(3)
    return out


EXPECTED = _expected_logs()


def _logs_of(name: str) -> dict[str, str | None]:
    return {f: s for f, s in EXPECTED.items() if f.startswith(f"{name}-")}


def _trial(engine: str, **extra) -> Trial:
    return Trial(id=f"{engine}-0000contract", engine=engine, model_key="m", model="org/contract-model",
                 profiles=["p"], flags={**FLAGS, **extra})


@pytest.fixture(params=NAMES)
def engine(request) -> Engine:
    return get_engine(request.param)


def test_the_registry_names_each_engine_by_its_own_name():
    assert NAMES and all(get_engine(n).name == n for n in NAMES)
    with pytest.raises(KeyError, match="unknown engine"):
        get_engine("no-such-engine")


def test_the_serve_command_renders_the_flags_the_model_and_the_address(engine):
    spec, trial = EngineSpec(), _trial(engine.name)
    argv = engine.command(spec, trial, port=18123, host="127.0.0.1")
    launcher = engine.launcher(spec)
    assert launcher and launcher == list(engine.default_launcher)
    # the launcher starts it, or a script of the engine's own that runs the launcher's program in
    # farm's interpreter with the launcher's arguments (the mock's mock_launch.py)
    assert argv[:len(launcher)] == launcher or (argv[0] == sys.executable and argv[2:len(launcher) + 1] == launcher[1:])
    assert "org/contract-model" in " ".join(argv)
    # true -> --flag, false -> nothing, dicts -> compact JSON, anything else -> --flag=value
    assert {"--contract-number=7", "--contract-switch", '--contract-json={"a":1,"b":[2]}'} <= set(argv)
    assert not any(a.startswith("--contract-off") for a in argv)
    assert argv[-2:] == [f"--{engine.host_flag}=127.0.0.1", f"--{engine.port_flag}=18123"]
    # what a user pastes: the same server, without this run's host and port
    pasted = shlex.split(engine.serve_command(spec, trial))
    assert "--contract-number=7" in pasted and not any(a.startswith(f"--{engine.port_flag}=") for a in pasted)


def test_secret_flags_reach_the_engine_but_not_the_pasted_command(engine):
    spec, trial = EngineSpec(), _trial(engine.name, **{"api-key": "sk-contract-secret"})
    assert "api-key" in engine.secret_flags(spec)
    assert "--api-key=sk-contract-secret" in engine.command(spec, trial, port=18123)
    pasted = engine.serve_command(spec, trial)
    assert "sk-contract-secret" not in pasted and f"--api-key={SECRET_MASK}" in pasted


def test_a_container_launch_runs_the_image_and_can_be_removed_by_name(engine):
    spec, trial = EngineSpec(image="registry.example/engine:1"), _trial(engine.name)
    argv = engine.command(spec, trial, port=18123, gpu_ids=["0"])
    assert argv[:2] == ["docker", "run"] and "registry.example/engine:1" in argv
    assert engine.cleanup_command(spec, trial, port=18123) == ["docker", "rm", "-f", engine.container_name(trial, 18123)]
    assert engine.cleanup_command(EngineSpec(), trial, port=18123) is None


def test_gpus_follow_the_flags_and_cpu_engines_take_none(engine):
    gpus = engine.gpus({})
    assert isinstance(gpus, int) and gpus >= 0
    assert gpus >= 1 if engine.uses_gpus else gpus == 0


def test_readiness_and_cache_reset_are_http_paths(engine):
    assert engine.ready_path.startswith("/")
    # Every benchmark run starts from an empty prefix cache: an engine that keeps one says how to reset it.
    if engine.uses_gpus:
        assert engine.reset_cache_path and engine.reset_cache_path.startswith("/")
    else:
        assert engine.reset_cache_path is None or engine.reset_cache_path.startswith("/")
    assert engine.metrics_path is None or engine.metrics_path.startswith("/")


def test_the_environment_never_carries_ray_variables(engine):
    env = engine.env(EngineSpec(env={"CONTRACT_VAR": "1"}), _trial(engine.name))
    assert env["CONTRACT_VAR"] == "1" and not [k for k in env if k.startswith("RAY_")]
    assert all(isinstance(v, str) for v in engine.cache_env(Path("/tmp/farm-cache")).values())  # type: ignore[arg-type]


def test_the_version_reader(engine):
    cmd = engine.version_command(EngineSpec())
    assert cmd is None or (isinstance(cmd, list) and cmd and all(isinstance(a, str) for a in cmd))
    assert engine.parse_version("engine version: 0.20.2\n") == "0.20.2"
    assert engine.parse_version("no digits here") is None


def test_an_engine_in_a_venv_reads_its_version_from_the_venvs_package_metadata(engine, tmp_path):
    """No `--version` process where the study's venv says it (installed as pip installs it)."""
    if engine.package is None:
        assert engine.own_version(EngineSpec(venv=str(tmp_path))) in (None, engine.own_version(EngineSpec()))
        return
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    (site / "other-9.9.dist-info").mkdir(parents=True)
    (site / "other-9.9.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: other\nVersion: 9.9\n")
    assert engine.own_version(EngineSpec(venv=str(tmp_path))) is None  # not installed there: the command says
    dist = site / f"{engine.package}-1.2.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {engine.package}\nVersion: 1.2.3\n")
    assert engine.own_version(EngineSpec(venv=str(tmp_path))) == "1.2.3"
    assert engine.own_version(EngineSpec()) is None  # a launcher on PATH: its command says


# Where farm runs an engine that this repository installs: the study that runs it and the script
# that builds it (`make engines`, which `make test` and CI run first). The version command runs there,
# with the study's environment, as a trial's probe does (actors/bench.py); an engine listed here must
# be there in CI. Other engines run from their default launcher wherever one is installed.
INSTALLED_BY_THE_REPO = {"vllm": ("configs/tiny-vllm-cpu.yaml", "scripts/setup-vllm-cpu.sh")}


def _where_farm_runs(engine: Engine) -> EngineSpec:
    if engine.name in INSTALLED_BY_THE_REPO:
        from farm.study.load import load_study

        return load_study(REPO / INSTALLED_BY_THE_REPO[engine.name][0]).engines[engine.name]
    return EngineSpec()


def test_the_version_command_runs_where_the_engine_is_installed(engine):
    from actors.proc import clean_env, expand_env

    spec = _where_farm_runs(engine)
    cmd = engine.version_command(spec)
    if cmd is None:
        return
    env = clean_env(dict(os.environ), expand_env(engine.env(spec, _trial(engine.name)), dict(os.environ)))
    out = None if shutil.which(cmd[0]) is None else subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    # Not installed: no launcher, or its Python has no package of the engine's name.
    if out is None or f"No module named '{engine.name}'" in out.stderr:
        if engine.name in INSTALLED_BY_THE_REPO and os.environ.get("CI"):
            pytest.fail(f"{engine.name} is not installed at {cmd[0]}: {INSTALLED_BY_THE_REPO[engine.name][1]} "
                        "builds it before the tests in CI")
        pytest.skip(f"{engine.name} is not installed here ({cmd[0]})")
    # Installed but broken (another module missing, a device it cannot infer) fails, never skips.
    assert out.returncode == 0, f"{shlex.join(cmd)} exited {out.returncode}:\n{out.stderr[-2000:]}"
    assert engine.parse_version(out.stdout + out.stderr)
    # Where the engine reads its version from farm's environment instead, it is the one its command prints.
    own = engine.own_version(spec)
    assert own is None or own == engine.parse_version(out.stdout + out.stderr), own


def test_failure_patterns_name_known_statuses(engine):
    known = {s.value for s in Status}
    assert engine.failure_patterns
    for fp in engine.failure_patterns:
        assert fp.status in known and fp.reason
        re.compile(fp.pattern)


def test_each_engine_brings_fixture_logs_of_its_own(engine):
    logs = _logs_of(engine.name)
    assert any(s is not None for s in logs.values()), f"no failure log for {engine.name} in {LOGS}/SOURCES.md"
    assert any(s is None for s in logs.values()), f"no healthy log for {engine.name} in {LOGS}/SOURCES.md"
    assert all((LOGS / f).is_file() for f in logs)


@pytest.mark.parametrize("name,log,expected", [(n, f, s) for n in NAMES for f, s in sorted(_logs_of(n).items())])
def test_an_engine_classifies_its_own_logs(name, log, expected):
    failure = get_engine(name).classify((LOGS / log).read_text())
    if expected is None:
        assert failure is None, f"{log}: healthy, classified as {failure}"
    else:
        assert isinstance(failure, Failure) and failure.status == expected, f"{log}: {failure}"
        assert failure.line and len(failure.line) <= 500


def test_dummy_weights_have_flags_or_need_none(engine):
    trial = _trial(engine.name).model_copy(update={"weights": "dummy"})
    argv = engine.command(EngineSpec(), trial, port=18123)
    if engine.dummy_weights_flags:
        assert set(engine.serve_args(trial)) >= {a for k, v in engine.dummy_weights_flags.items()
                                                 for a in ([f"--{k}"] if v is True else [f"--{k}={v}"])}
    else:  # an engine that loads no checkpoint serves a dummy model as any other; one that does is refused
        assert not engine.loads_weights and argv == engine.command(EngineSpec(), _trial(engine.name), port=18123)
    assert engine.serves_dummy_weights == (bool(engine.dummy_weights_flags) or not engine.loads_weights)


def test_a_grid_refuses_dummy_weights_on_an_engine_without_a_dummy_format(monkeypatch):
    from farm.errors import SpecError
    from farm.study.grid import expand
    from farm.study.load import validate_study

    data = {"name": "dummy-refused", "primary_profile": "p", "models": {"m": {"name": "org/m", "weights": "dummy"}},
            "engines": {"vllm": {}}, "profiles": {"p": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 8},
                                                       "requests": 4}},
            "grids": {"g": {"blocks": [{"engine": "vllm", "models": ["m"]}]}}}
    study = validate_study(json.loads(json.dumps(data)), "s.yaml")
    assert expand(study, "g")  # vLLM has a dummy load format
    monkeypatch.setattr(type(get_engine("vllm")), "dummy_weights_flags", {})
    with pytest.raises(SpecError, match="cannot serve model 'm' with weights: dummy"):
        expand(study, "g")


def test_knobs_and_counters_start_empty(engine):
    assert engine.render_knobs({}) == {}
    assert engine.parse_counters("") == {}
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in engine.counters.items())


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_a_gpu_engine_keeps_its_compile_caches_in_the_node_cache(name):
    # A second start of a configuration on a node skips compiling only if the caches outlive the
    # trial: every one of them lives under farm's per-node cache directory.
    root = Path("/tmp/farm-cache/compile")
    caches = get_engine(name).cache_env(root)  # type: ignore[arg-type]
    assert caches and all(Path(p).is_relative_to(root) for p in caches.values())
    assert len(set(caches.values())) == len(caches)
