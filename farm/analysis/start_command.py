"""Where a local search starts: the serve command a user runs today, read back into a trial of
the grid (pure).

`--from` takes a trial of the grid (its name or id) or a command line. A command is read by the
engine that owns its launcher (each engine module owns the inverse of its rendering), its flags
checked against the engine's own flag list where farm keeps one (farm/engines/facts/), its model
matched with the study's. Flags that no trial of the grid sets stay verbatim in every trial of
the search, so the command farm recommends differs from the user's only where the search
changed something; the others must equal one trial's, or the command is refused in one line
naming the study file and the option or key (`--from`, `start`), quoting at most a short escaped
excerpt of the command (a pasted command can be any length). A command is read as a shell reads
it: lines continued with a backslash are one line (`shell_words`).
"""

from __future__ import annotations

import shlex
from pathlib import PurePosixPath
from collections.abc import Sequence
from typing import Any

from farm.engines import get_engine
from farm.engines.base import render_flag
from farm.errors import UserError
from farm.inputs import joined_continuations, quoted
from farm.study.grid import select_trials
from farm.study.spec import Study
from farm.study.trial import Trial, model_identity, trial_id


def _rendered(flags: dict[str, Any]) -> dict[str, str]:
    # A flag that renders nothing (an axis value null or false: the engine's default) is not on the
    # command line, so a command without it is that trial.
    return {name: " ".join(shown) for name, value in flags.items() if (shown := render_flag(name, value))}


def shell_words(command: str) -> list[str]:
    """The words a POSIX shell makes of `command` (continuations joined; no expansion); ValueError
    for an unclosed quote."""
    return shlex.split(joined_continuations(command))


def start_of(study: Study, grid: str, trials: list[Trial], given: str, *, key: str = "--from") -> tuple[list[Trial], str]:
    """(the grid's trials, with the command's extra flags where it has any; the start's id).

    Refused in one `UserError` naming the study file and `key`."""
    try:
        return _start_of(study, grid, trials, given, key=key)
    except UserError as exc:
        if exc.file is None:
            exc = type(exc)(exc.reason, file=study.source, key=exc.key or key)
        raise exc from None


def _start_of(study: Study, grid: str, trials: list[Trial], given: str, *, key: str) -> tuple[list[Trial], str]:
    if not given.strip():
        raise UserError("expected a trial of the grid or a serve command, got nothing", key=key)
    try:  # a trial of the grid, by name or id
        (tid,) = select_trials(trials, [given], key=key)
        return trials, tid
    except UserError:
        if len(joined_continuations(given).split()) == 1:
            raise
    try:
        argv = shell_words(given)
    except ValueError as exc:
        raise UserError(f"cannot split the command ({exc}: {len(given):,} characters)", key=key) from None
    engines = dict.fromkeys(t.engine for t in trials)
    for name in engines:
        engine = get_engine(name)
        try:
            parsed = engine.parse_command(argv, study.engines[name])
        except ValueError as exc:
            raise UserError(f"a {name} command farm cannot read: {exc}", key=key) from None
        if parsed is not None:
            return _match(study, grid, [t for t in trials], name, *parsed, key=key)
    heads = "; ".join(f"{n}: {' '.join(get_engine(n).launchers(study.engines[n])[0])}" for n in engines)
    raise UserError(f"not a serve command of an engine of grid '{grid}' (it starts with {quoted(argv[0])}; the "
                    f"grid's engines start with {heads})", key=key)


def _match(study: Study, grid: str, trials: list[Trial], engine_name: str, model: str, flags: dict[str, Any], *,
           key: str) -> tuple[list[Trial], str]:
    engine = get_engine(engine_name)
    unknown = engine.unknown_flags(flags)
    if unknown:
        more = f" and {len(unknown) - 1:,} other unknown flags" if len(unknown) > 1 else ""
        raise UserError(f"{engine_name} takes no flag {quoted('--' + unknown[0])}{more} "
                        f"({engine.flags_source()})", key=key)
    mine = [t for t in trials if t.engine == engine_name and not t.node_control_of]
    models = {t.model for t in mine}
    wanted = next((m for m in models if m == model), None) or next(
        (m for m in models if model_identity(m) == model_identity(model)), None) or next(
        (m for m in models if _relative_to(m, model)), None)
    if wanted is None:
        raise UserError(f"the command serves {quoted(model)}; grid '{grid}' serves {', '.join(sorted(models))} with "
                        f"{engine_name}", key=key)
    mine = [t for t in mine if t.model == wanted]
    grid_flags = {f for t in mine for f in t.all_flags}
    extra = {k: v for k, v in flags.items() if k not in grid_flags}
    core = _rendered({k: v for k, v in flags.items() if k in grid_flags})
    for t in mine:
        if _rendered(t.all_flags) == core:
            return _with_extra(trials, extra, engine_name), _with_extra([t], extra, engine_name)[0].id
    # The nearest trial: the fewest flags apart, to say what differs.
    def apart(t: Trial) -> list[str]:
        theirs = _rendered(t.all_flags)
        return sorted({core.get(k) or f"(no --{k})" for k in core.keys() | theirs.keys() if core.get(k) != theirs.get(k)})
    near = min(mine, key=lambda t: len(apart(t)))
    raise UserError(f"the command matches no trial of grid '{grid}' in the flags the grid varies: the nearest, "
                    f"{near.label}, differs in {', '.join(apart(near))} (flags no trial sets stay as given)", key=key)


def _relative_to(local: str, given: str) -> bool:
    """Whether `given`, a path as the user typed it in their shell (`.models/tiny`, `./m`), can be
    the grid's local model `local` (an absolute path: the study resolves its own against the study
    file). Compared by the trailing parts, as far as the given path names them: the command is read
    without the shell's working directory, and a hub id (`org/name`) never names an absolute path."""
    if model_identity(local) == local or model_identity(given) != given:
        return False  # the grid's model is a hub id, or the given one is absolute (compared above)
    parts = [p for p in PurePosixPath(given).parts if p != "."]
    if ".." in parts:  # above the shell's directory: what follows the last `..` is still named
        parts = parts[len(parts) - parts[::-1].index("..") :]
    return bool(parts) and PurePosixPath(local).parts[-len(parts) :] == tuple(parts)


def _with_extra(trials: Sequence[Trial], extra: dict[str, Any], engine_name: str) -> list[Trial]:
    """The trials of `engine_name` with the command's own flags added (new ids: another server)."""
    if not extra:
        return list(trials)
    out = []
    for t in trials:
        if t.engine != engine_name:
            out.append(t)
            continue
        flags = {**t.flags, **extra}
        out.append(t.model_copy(update={"flags": flags, "id": trial_id(t.engine, t.model, {**t.required_flags, **flags},
                                                                        t.weights)}))
    return out
