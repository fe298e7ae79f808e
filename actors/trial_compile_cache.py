"""A trial's side of the shared compile cache (actors/compile_cache.py): its group's cache pulled
from the shared store before the engine starts, where this node has none of it, and published
after a start that compiled. A store that cannot be opened is a cold start, never a failed trial;
what happened goes into the trial's `engine_reported`, secrets masked."""

from __future__ import annotations

from pathlib import Path

from actors import compile_cache
from farm.secrets import scrub


def _open(where: str, reported: dict, secrets: list[str]):
    try:
        return compile_cache.open_store(where)
    except Exception as exc:  # noqa: BLE001 - no shared cache is a cold start, never a failed trial
        reported["compile_cache_unavailable"] = scrub(f"{type(exc).__name__}: {exc}", secrets)[:300]
        return None


def pull(where: str | None, group: str, group_dir: Path, reported: dict, secrets: list[str]) -> None:
    """The group's cache from the shared store `where`, where this node has none of it yet."""
    if not where or compile_cache.has_files(group_dir):
        return
    store = _open(where, reported, secrets)
    if store is None:
        return
    said = compile_cache.pull_group(store, group, group_dir)
    if "compile_cache_discarded" in said:
        said["compile_cache_discarded"] = scrub(said["compile_cache_discarded"], secrets)
    reported.update(said)


def publish(where: str | None, group: str | None, group_dir: Path, engine_name: str, gpu_model: str | None,
            reported: dict, secrets: list[str]) -> None:
    """After a start that compiled, the group's cache for the other nodes and later sweeps."""
    if not (where and group) or not compile_cache.compiled_here(reported, group_dir):
        return
    store = _open(where, reported, secrets)
    if store is None:
        return
    said = compile_cache.publish_group(store, group_dir, group, engine_name, gpu_model)
    reported.update({k: scrub(v, secrets) if isinstance(v, str) else v for k, v in said.items()})
