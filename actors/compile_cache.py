"""Compile caches shared across the nodes of a sweep, across sweeps and across machines.

An engine start is the largest cost of a trial that measures nothing: on the H200 a cold vLLM start
took 251-310 s and about 100 s with its compile cache kept. Each node keeps one cache directory per
compile group (`group_key`: what changes compiled code, the engine's `compile_key`, and the GPU
model), under farm's node cache. The first cold start of a group *publishes* that directory
(packed, checksummed, size-capped) and every later start of the group on a node that lacks it
*pulls* it first:

- within a Ray cluster, through a registry actor of the sweep that holds each group's pack in
  Ray's object store (`RayStore`), so nodes without shared storage share;
- with `compile_cache: DIR` in the study (a directory every node sees: NFS, a mounted bucket), as
  files there (`DirStore`), which outlive the sweep: the next sweep, on any machine, starts warm;
  evicted by size, oldest first.

A pack that fails its checksum or does not unpack is discarded with a warning in the trial's
record, and the start goes cold: a cache never fails a trial.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import time
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from farm.study.trial import Trial

MAX_PACK_BYTES = 4 * 2**30       # a group's pack larger than this is not shared (the node keeps it)
DEFAULT_DIR_MAX_BYTES = 50 * 2**30
PACKED_MARK = ".farm-pack.json"  # in a group's directory: where its files came from


class CacheError(Exception):
    """A shared cache that cannot be used: the start goes cold."""


class PackMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    sha256: str
    bytes: int
    files: int
    engine: str
    gpu: str | None = None
    created_at: float


def group_key(engine: Any, trial: Trial, gpu_name: str | None) -> str | None:
    """What a compiled cache is good for: the engine's compile key of the trial (its model as the
    engine's cache knows it: `Engine.compile_cache_model`) on this GPU model; None where the engine
    keeps none."""
    key = engine.compile_key(engine.compile_cache_model(trial.model), trial.all_flags, trial.weights)
    if key is None:
        return None
    # an engine whose cache folders changed (`compile_cache_layout`) never pulls a pack without the new ones
    layout = [engine.compile_cache_layout] if engine.compile_cache_layout else []
    return hashlib.sha256(json.dumps([key, gpu_name or "cpu", *layout]).encode()).hexdigest()[:24]


def has_files(directory: Path) -> bool:
    return directory.is_dir() and any(p.is_file() for p in directory.rglob("*") if p.name != PACKED_MARK)


def pack(directory: Path, key: str, engine: str, gpu: str | None) -> tuple[PackMeta, bytes]:
    """The group's directory as one gzip'd tar (paths relative to it; the mark left out)."""
    buf = io.BytesIO()
    files = 0
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=3) as tar:
        for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != PACKED_MARK):
            tar.add(path, arcname=str(path.relative_to(directory)), recursive=False)
            files += 1
    blob = buf.getvalue()
    return PackMeta(key=key, sha256=hashlib.sha256(blob).hexdigest(), bytes=len(blob), files=files, engine=engine,
                    gpu=gpu, created_at=time.time()), blob


def unpack(meta: PackMeta, blob: bytes, directory: Path) -> int:
    """Into the group's directory (files already there are kept); the number of files written.
    A checksum that does not match, or a pack that does not read, is a `CacheError`."""
    if hashlib.sha256(blob).hexdigest() != meta.sha256:
        raise CacheError(f"the pack of group {meta.key} fails its checksum ({len(blob)} bytes)")
    staging = directory.parent / f".{directory.name}.incoming-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
            tar.extractall(staging, filter="data")  # no absolute paths, links out or device files
        written = 0
        for path in staging.rglob("*"):
            if path.is_file():
                target = directory / path.relative_to(staging)
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(path, target)
                    written += 1
        return written
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise CacheError(f"the pack of group {meta.key} does not unpack ({type(exc).__name__}: {exc})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def mark(directory: Path, meta: PackMeta, how: str) -> None:
    (directory / PACKED_MARK).write_text(json.dumps({"how": how, **meta.model_dump()}))


def pull(store: Store, key: str, directory: Path) -> dict | None:
    """The group's pack from `store` unpacked into `directory`: what was pulled, or None when the
    store holds none. A pack that does not unpack is a `CacheError` (the caller empties the
    directory: the start goes cold)."""
    found = store.get(key)
    if found is None:
        return None
    meta, blob = found
    written = unpack(meta, blob, directory)
    mark(directory, meta, "pulled")
    return {"from": store.where, "bytes": meta.bytes, "files": written}


def publish(store: Store, directory: Path, key: str, engine: str, gpu: str | None) -> dict:
    """The group's directory packed into `store`: what was published. A pack over MAX_PACK_BYTES
    is a `CacheError` (the node keeps it)."""
    meta, blob = pack(directory, key, engine, gpu)
    if meta.bytes > MAX_PACK_BYTES:
        raise CacheError(f"{meta.bytes} bytes, more than the {MAX_PACK_BYTES}")
    store.put(meta, blob)
    mark(directory, meta, "published")
    return {"to": store.where, "bytes": meta.bytes, "files": meta.files}


def pull_group(store: Store, key: str, directory: Path) -> dict[str, Any]:
    """A start's pull of its group, as its record says it: `compile_cache_pulled`, or
    `compile_cache_discarded` (why) with the directory emptied so the start goes cold; {} when the
    store holds no pack of the group."""
    try:
        pulled = pull(store, key, directory)
    except Exception as exc:  # noqa: BLE001 - a corrupt or unreadable pack: discarded, never a failed start
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True, exist_ok=True)
        return {"compile_cache_discarded": f"{exc}"[:300]}
    return {"compile_cache_pulled": pulled} if pulled is not None else {}


def compiled_here(reported: dict[str, Any], directory: Path) -> bool:
    """Whether a start compiled its group's cache itself (its record says cold and it pulled
    nothing) and left files to share: only such a start publishes."""
    from farm.analysis.start_phases import start_cache

    return "compile_cache_pulled" not in reported and start_cache(reported) == "cold" and has_files(directory)


def publish_group(store: Store, directory: Path, key: str, engine: str, gpu: str | None) -> dict[str, Any]:
    """The group's pack into `store` (after `compiled_here`), as the start's record says it:
    `compile_cache_published` or `compile_cache_not_published` (why)."""
    try:
        return {"compile_cache_published": publish(store, directory, key, engine, gpu)}
    except CacheError as exc:
        return {"compile_cache_not_published": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the start measured what it measured; sharing is a bonus
        return {"compile_cache_not_published": f"{type(exc).__name__}: {exc}"[:300]}


def cache_dirs_cold(caches: dict[str, str]) -> bool | None:
    """Make the engine's cache directories; whether all are empty (a cold start), None without any."""
    for path in caches.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    return not any(any(Path(path).iterdir()) for path in caches.values()) if caches else None


class Store(Protocol):
    where: str

    def get(self, key: str) -> tuple[PackMeta, bytes] | None: ...

    def put(self, meta: PackMeta, blob: bytes) -> None: ...


class DirStore:
    """Packs as files in a directory every node sees (`compile_cache: DIR`): `<key>.tgz` beside
    `<key>.json`, written atomically, the oldest evicted past `max_bytes`."""

    def __init__(self, path: str | Path, max_bytes: int = DEFAULT_DIR_MAX_BYTES):
        self.path, self.max_bytes = Path(path).expanduser(), max_bytes
        self.where = f"directory {self.path}"

    def get(self, key: str) -> tuple[PackMeta, bytes] | None:
        meta_path, blob_path = self.path / f"{key}.json", self.path / f"{key}.tgz"
        if not (meta_path.is_file() and blob_path.is_file()):
            return None
        try:
            meta = PackMeta.model_validate_json(meta_path.read_text())
            blob = blob_path.read_bytes()
        except (OSError, ValueError) as exc:
            raise CacheError(f"the pack of group {key} in {self.path} does not read ({exc})") from None
        os.utime(blob_path)  # used: the last to be evicted
        return meta, blob

    def put(self, meta: PackMeta, blob: bytes) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".tgz", blob), (".json", meta.model_dump_json().encode())):
            tmp = self.path / f".{meta.key}{suffix}.{os.getpid()}"
            tmp.write_bytes(data)
            os.replace(tmp, self.path / f"{meta.key}{suffix}")
        self.evict()

    def evict(self) -> list[str]:
        packs = sorted(self.path.glob("*.tgz"), key=lambda p: p.stat().st_mtime)
        total, gone = sum(p.stat().st_size for p in packs), []
        for p in packs[:-1]:  # never the newest
            if total <= self.max_bytes:
                break
            total -= p.stat().st_size
            p.unlink(missing_ok=True)
            p.with_suffix(".json").unlink(missing_ok=True)
            gone.append(p.stem)
        return gone


class RayStore:
    """Packs in Ray's object store, held by the sweep's registry actor (`CacheRegistry`)."""

    def __init__(self, name: str, namespace: str | None = None):
        import ray

        self.actor = ray.get_actor(name, namespace=namespace)
        self.where = "the sweep's Ray object store"

    def get(self, key: str) -> tuple[PackMeta, bytes] | None:
        import ray

        found = ray.get(self.actor.get.remote(key))
        if found is None:
            return None
        meta, (ref,) = found
        return PackMeta.model_validate(meta), ray.get(ref)

    def put(self, meta: PackMeta, blob: bytes) -> None:
        import ray

        ray.get(self.actor.put.remote(meta.model_dump(), blob))


class CacheRegistry:
    """The sweep's registry of compile-cache packs (a Ray actor the driver starts): each group's
    pack put in the object store by this actor, so it lives as long as the sweep; the oldest go
    past `max_bytes`."""

    def __init__(self, max_bytes: int = DEFAULT_DIR_MAX_BYTES):
        self.max_bytes = max_bytes
        self.entries: dict[str, tuple[dict, Any, int]] = {}

    def put(self, meta: dict, blob: bytes) -> None:
        import ray

        self.entries[meta["key"]] = (meta, ray.put(blob), len(blob))
        while sum(e[2] for e in self.entries.values()) > self.max_bytes and len(self.entries) > 1:
            oldest = min(self.entries, key=lambda k: self.entries[k][0]["created_at"])
            del self.entries[oldest]

    def get(self, key: str) -> tuple[dict, list] | None:
        entry = self.entries.get(key)
        return None if entry is None else (entry[0], [entry[1]])

    def keys(self) -> list[str]:
        return list(self.entries)


REGISTRY_NAME = "farm-compile-cache"


def open_store(where: str | None) -> Store | None:
    """`ray:NAMESPACE` (the sweep's registry actor there) or a directory; None: no sharing."""
    if not where:
        return None
    if where.startswith("ray:"):
        return RayStore(REGISTRY_NAME, where[4:])
    return DirStore(where)
