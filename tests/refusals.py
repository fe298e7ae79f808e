"""The house rule for bad input, as one assertion: `farm ARGS` in a directory of its own ends in
exit 2 with one line on stderr (no traceback), and leaves the directory as it found it, with no
Ray started.

Through the real command group in this process (click's CliRunner), as tests/unit/cli/test_bad_input.py
runs its table: a process per case would cost seconds each.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from click.testing import CliRunner


def write_files(tmp: Path, files: dict[str, str | bytes]) -> None:
    for name, data in files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)


def _tree(tmp: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(tmp)): (p.read_bytes() if p.is_file() else None) for p in sorted(tmp.rglob("*"))}


def run_farm_here(tmp: Path, args: list[str], files: dict[str, str | bytes] | None = None,
                  env: dict[str, str | None] | None = None):
    """`farm ARGS` run in `tmp` holding `files`; MLFLOW_TRACKING_URI, RAY_ADDRESS and
    FARM_CACHE_DIR unset unless `env` sets them. Returns click's result and the tree before."""
    from farm.cli.main import cli

    write_files(tmp, files or {})
    before = _tree(tmp)
    clean = {"MLFLOW_TRACKING_URI": None, "RAY_ADDRESS": None, "FARM_CACHE_DIR": None, **(env or {})}
    old = os.getcwd()
    os.chdir(tmp)
    try:
        result = CliRunner().invoke(cli, args, env=clean, catch_exceptions=True)
    finally:
        os.chdir(old)
    return result, before


def refused(tmp: Path, args: list[str], files: dict[str, str | bytes] | None = None,
            env: dict[str, str | None] | None = None) -> str:
    """The one line `farm ARGS` refuses with (without its `error: `), after asserting the rule."""
    result, before = run_farm_here(tmp, args, files, env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"farm {args} raised {result.exception!r}") from result.exception
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    assert _tree(tmp) == before, "something was written"
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized(), "Ray was started"
    return lines[0].removeprefix("error: ")


def mock_study(name: str) -> str:
    """The smallest valid study (one mock trial `g`, one profile `p`): the ground a refusal test
    changes one option, variable or value of."""
    return f"""\
name: {name}
primary_profile: p
models: {{tiny: {{name: farm-tiny, tokenizer: "farm:tiny"}}}}
engines: {{mock: {{}}}}
profiles: {{p: {{data: {{kind: synthetic, prompt_tokens: 8, output_tokens: 4}}, requests: 4}}}}
grids: {{g: {{blocks: [{{engine: mock, models: [tiny]}}]}}}}
"""
