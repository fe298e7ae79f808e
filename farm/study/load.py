"""Reading a study file: includes, paths relative to the file, and validation against the engine registry.

Above farm.engines (it asks the registry which engine names exist); the models it validates
(farm/study/spec.py) are below it, so an engine module can import them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from farm.errors import SpecError, key_path
from farm.inputs import read_yaml_file

from farm.engines import ENGINES, get_engine
from farm.engines.flag_types import type_error
from farm.study.spec import ENGINES_CONTEXT, Study, _RefError

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "qwen3.5-35b-a3b-h200.yaml"


def _include_paths(includes: Any, source: Path) -> list[Path]:
    """`include: FILE` or `include: [FILE, ...]`, relative to the including file."""
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(rel, str) and rel for rel in includes):
        raise SpecError("expected a file name or a list of file names", file=str(source), key="include")
    paths = []
    for i, rel in enumerate(includes):
        try:
            paths.append((source.parent / os.path.expanduser(rel)).resolve())
        except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a symlink loop
            raise SpecError(f"'{rel}' is not a usable path ({exc})", file=str(source), key=f"include[{i}]") from None
    return paths


def _merge_includes(data: dict, source: Path, seen: set[Path]) -> dict:
    merged: dict = {}
    for inc in _include_paths(data.pop("include", []) or [], source):
        if inc in seen:
            raise SpecError(f"include cycle through {inc}", file=str(source), key="include")
        inc_data = _read_yaml(inc, seen | {inc})
        for key, value in inc_data.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path, seen: set[Path], shown: str | None = None) -> dict:
    # Bytes, encoding, size, nesting, aliases, duplicate keys and numbers: farm.inputs, the one
    # place where user files are read. `shown`: the path as the user gave it.
    data = read_yaml_file(path, what="study file", shown=shown)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError("a study file must be a mapping", file=shown or str(path))
    _resolve_relative_paths(data, path.parent)
    return _merge_includes(data, path, seen)


def _resolve_relative_paths(data: dict, base: Path) -> None:
    """Paths written `./x` or `../x` are relative to the file that names them, not to the directory
    farm (or a Ray worker) runs in: an engine's venv and launcher executable, a model's and a
    tokenizer's directory. Anything else (a hub id, a bare command, an absolute path) is left as is."""

    def fix(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(("./", "../")):
            try:
                return str((base / value).resolve())
            except (OSError, ValueError, RuntimeError):  # a NUL byte, a symlink loop: refused by what checks it
                return value
        return value

    engines = data.get("engines")
    for engine in (engines.values() if isinstance(engines, dict) else []):
        if isinstance(engine, dict):
            if "venv" in engine:
                engine["venv"] = fix(engine["venv"])
            if isinstance(engine.get("launcher"), list) and engine["launcher"]:
                engine["launcher"][0] = fix(engine["launcher"][0])
    if isinstance(data.get("compile_cache"), str) and data["compile_cache"] != "ray":
        data["compile_cache"] = fix(data["compile_cache"])
    reference = data.get("reference")
    if isinstance(reference, dict) and "results" in reference:
        reference["results"] = fix(reference["results"])
    models = data.get("models")
    for key, model in (list(models.items()) if isinstance(models, dict) else []):
        if isinstance(model, str):
            models[key] = fix(model)
        elif isinstance(model, dict):
            for field in ("name", "tokenizer"):
                if field in model:
                    model[field] = fix(model[field])


def load_study(path: str | Path | None = None) -> Study:
    """Read and validate a study; raises `SpecError` with file, key path and reason."""
    if path is not None and not str(path).strip():
        raise SpecError("expected a study file, got an empty path", key="--config")
    source = Path(path) if path is not None else DEFAULT_CONFIG
    shown = str(path) if path is not None else os.path.relpath(DEFAULT_CONFIG)
    try:
        resolved = source.resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a symlink loop
        raise SpecError(f"not a usable path ({exc})", file=shown) from None
    data = _read_yaml(resolved, {resolved}, shown)
    study = validate_study(data, shown)
    check_flag_types(study, shown)
    study._source = shown
    return study


def check_flag_types(study: Study, shown: str) -> None:
    """Every value the study gives a flag its engine types (`Engine.flag_types`: GPU counts,
    memory fractions, booleans, JSON objects) is of that type and range: found here, before
    anything starts, rather than as a trial the engine refuses or a GPU count farm cannot read."""
    for name, spec in study.engines.items():
        types = get_engine(name).flag_types
        for flag, value in spec.flags.items():
            _check_flag(types, flag, value, shown, f"engines.{name}.flags.{flag}")
    for gname, grid in study.grids.items():
        for b, block in enumerate(grid.blocks):
            if block.engine not in ENGINES:
                continue  # named in its own error by the schema
            types = get_engine(block.engine).flag_types
            where = f"grids.{gname}.blocks[{b}]"
            for flag, value in block.flags.items():
                _check_flag(types, flag, value, shown, f"{where}.flags.{flag}")
            for flag, values in block.axes.items():
                for i, value in enumerate(values):
                    _check_flag(types, flag, value, shown, f"{where}.axes.{flag}[{i}]")


def _check_flag(types, flag: str, value: Any, shown: str, key: str) -> None:
    reason = type_error(types, flag, value)
    if reason is not None:
        raise SpecError(reason, file=shown, key=key)


def validate_study(data: Any, shown: str) -> Study:
    """Parsed study data -> `Study`; pydantic's error becomes one `SpecError` with the key path."""
    try:
        return Study.model_validate(data, context={ENGINES_CONTEXT: frozenset(ENGINES)})
    except ValidationError as exc:
        err = exc.errors()[0]
        ctx_err = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_err, _RefError):
            raise SpecError(ctx_err.reason, file=shown, key=ctx_err.key) from None
        # Drop pydantic's union/validator bookkeeping from the location; keep the user's keys.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key missing"
        msg = msg.removeprefix("Value error, ")
        raise SpecError(msg, file=shown, key=key_path(loc) or None) from None
