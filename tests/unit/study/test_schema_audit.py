"""No option that silently does nothing.

Every field of the study schema (each pydantic model in farm/study/spec.py, sections.py and
grid_spec.py) is read by the code it claims to steer: some module of farm/ or actors/ other than
those accesses it as an attribute (`.field_name`), or the schema reads it in an accessor that is
itself used elsewhere (listed in
READ_THROUGH), or it is on the commented ALLOW_LIST. A field added to the schema that nothing
reads fails here. Likewise every option of every `farm` command is used by its command.

A name-level check: `.name` read anywhere counts for every field called `name`. It catches the
field nobody reads at all, which is the mistake that happens (a key a user sets, validated,
then ignored).
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

import click
from pydantic import BaseModel

import farm.study.grid_spec as grid_spec
import farm.study.sections as sections
import farm.study.spec as spec
from farm.cli.main import cli

REPO = Path(__file__).resolve().parents[3]
SCHEMA = (spec, sections, grid_spec)
SCHEMA_FILES = {REPO / "farm" / "study" / f"{m.__name__.rsplit('.', 1)[1]}.py" for m in SCHEMA}

# Fields spec.py itself reads, in an accessor of its own that the rest of farm calls.
READ_THROUGH = {
    "Study.experiment": "grid_experiment",          # the grid's, else `experiment or name`: the MLflow experiment
    "GridSpec.experiment": "grid_experiment",       # ... where the grid names its own
    "GridBlock.skip_unsupported": "skips",          # grid.py asks block.skips(knob, engine)
    "EngineSpec.skip_unsupported": "skips",         # ... which also reads the engine's
    # a synthetic profile's length spread, handed to guidellm as one mapping (bench_client.py)
    **{f"DataSpec.{name}": "spread" for name in ("prompt_tokens_stdev", "prompt_tokens_min", "prompt_tokens_max",
                                                "output_tokens_stdev", "output_tokens_min", "output_tokens_max")},
}

# Fields read generically, or not yet: each says why.
ALLOW_LIST = {
    # Documentation for whoever reads the study; it travels with the study's snapshot in MLflow
    # (sweep/study.yaml, a model_dump of the whole study) and steers nothing by design.
    "Study.description": "documentation",
    "GridSpec.description": "documentation",
}


def _sources() -> dict[Path, str]:
    files = [p for root in ("farm", "actors") for p in (REPO / root).rglob("*.py")]
    return {p: p.read_text() for p in files if p not in SCHEMA_FILES}


def _schema_fields() -> list[str]:
    out = []
    for module in SCHEMA:
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseModel) and cls.__module__ == module.__name__:
                out += [f"{name}.{field}" for field in cls.model_fields]
    return out


def _read_outside_spec(attribute: str, sources: dict[Path, str]) -> bool:
    pattern = re.compile(r"\." + re.escape(attribute) + r"\b")
    return any(pattern.search(text) for text in sources.values())


def test_the_audit_sees_the_schema():
    fields = _schema_fields()
    assert "ProfileSpec.requests" in fields and "Study.grids" in fields and len(fields) > 50


def test_every_study_field_is_read_by_the_code_it_steers():
    sources = _sources()
    unread = []
    for qualified in _schema_fields():
        field = qualified.split(".", 1)[1]
        if qualified in ALLOW_LIST:
            continue
        accessor = READ_THROUGH.get(qualified)
        if accessor is not None:
            assert any(re.search(r"\." + re.escape(field) + r"\b", path.read_text()) for path in SCHEMA_FILES)
            if not _read_outside_spec(accessor, sources):
                unread.append(f"{qualified} (through {accessor}, which nothing calls)")
            continue
        if not _read_outside_spec(field, sources):
            unread.append(qualified)
    assert not unread, ("study fields that no code outside the study schema reads (wire them, remove them, or say "
                        f"why in ALLOW_LIST): {unread}")


def test_the_allow_list_holds_only_fields_that_exist_and_are_unread_or_generic():
    fields = set(_schema_fields())
    assert set(ALLOW_LIST) <= fields and set(READ_THROUGH) <= fields
    # Once issue 11 lands, warmup_requests is read and leaves the allow-list.
    sources = _sources()
    stale = [q for q, why in ALLOW_LIST.items() if why.startswith("wired by") and _read_outside_spec(q.split(".")[1], sources)]
    assert not stale, f"now read, take them off ALLOW_LIST: {stale}"


def _commands(group: click.Group):
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command)
        else:
            yield name, command


def _names_used(function) -> set[str]:
    """Every variable name the function's body reads (its decorators and signature aside)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    body = tree.body[0].body
    return {node.id for stmt in body for node in ast.walk(stmt) if isinstance(node, ast.Name)}


# Commands that hand their options on as one typed object (`**options`): the object, and the
# module that must read each of its fields.
HANDED_ON = {"sweep": ("farm.run.sweep_plan", "SweepOptions")}


def _handed_on_fields_read(command: str) -> set[str]:
    """The fields of the object `command` hands its options to that its module reads (`x.field`)."""
    import dataclasses
    import importlib

    module_name, cls_name = HANDED_ON[command]
    module = importlib.import_module(module_name)
    fields = {f.name for f in dataclasses.fields(getattr(module, cls_name))}
    tree = ast.parse(inspect.getsource(module))
    read = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)}
    return fields & read


def test_every_cli_option_is_used_by_its_command():
    unused = []
    for name, command in _commands(cli):
        used = _names_used(command.callback)
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(command.callback).parameters.values()):
            assert name in HANDED_ON, f"farm {name} takes **options: name the object it hands them to in HANDED_ON"
            used |= _handed_on_fields_read(name)
        unused += [f"farm {name} {param.opts[0]}" for param in command.params
                   if param.name not in used and not getattr(param, "is_eager", False)]
    assert not unused, f"options their command never reads: {unused}"
