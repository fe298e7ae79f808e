#!/usr/bin/env python
"""Build an offline bundle: the Python packages a GPU node without network lacks, as a few files.

    python scripts/offline-bundle.py --name engine-vllm --out .bundles \\
        --have bench/h200/node-freeze.txt --prune scripts/bundles/vllm-h200.prune.yaml \\
        --import-check vllm vllm==0.20.2

A node without network (the lent H200) already has most of a heavy stack (torch, numpy,
transformers ...). This script resolves the requirements *for the node* (its Python version and
platform tags, not this machine's) with the node's packages as constraints, downloads only the
wheels the node lacks, installs them into one directory tree, removes what a declared prune list
names, and packs the tree as `xz` parts small enough to copy one per command:

    OUT/NAME/NAME.tar.xz.part000 ...   the parts (at most --part-mib MiB each)
    OUT/NAME/manifest.json             what is inside, what was skipped and why, sha256 of parts
    OUT/NAME/install.sh                `sh install.sh TARGET_DIR` on the node

A bundle already built is cut into smaller parts, the same archive, with

    python scripts/offline-bundle.py --resplit OUT/NAME --part-mib 36

On the node the tree is used with `PYTHONPATH=TARGET_DIR` (before the node's own site-packages, so a
version bundled because the node's did not fit wins). A second bundle can be made against the
first one's manifest.json (`--have`), so shared packages are not carried twice; then the node
runs with `PYTHONPATH=second-tree:first-tree`.

Prune list format (YAML; every entry needs a reason, see scripts/bundles/*.prune.yaml):

    distributions:            # never downloaded (the tree is installed with --no-deps, so a
      - name: flashinfer-python    # package that Requires-Dist it still installs)
        reason: why the node never needs it, and what the engine must be told instead
    files:                    # globs relative to the tree, removed after install
      - glob: vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so
        reason: why it is never loaded
        optional: false       # default: a glob that matches nothing is an error (stale list)
    keep_node:                # use the node's own version although a requirement pins another
      - name: numba                # (its dependencies are then the node's, not walked); the
        reason: measured to work   # manifest lists every pin so overridden
    cuda_arches:              # CUDA libraries (ELF) that carry cubins for several GPUs: the
      - glob: sgl_kernel/flash_ops.abi3.so   # cubins of the other architectures are zeroed in
        keep_sm: [90]          # place (the file keeps its size, xz packs the zeros to nothing);
        reason: an sm90 node   # PTX is never touched (a driver may JIT it for a newer GPU)

Resolution: pip's resolver on this machine with the target's tags, the --have packages as
`name==version` constraints (local labels stripped: the node's +cu130 build counts as that
version). When pip reports that a requirement needs another version than the node has, that
constraint is dropped and pip runs again; the package is bundled unless the node's version still
satisfies every requirement on it (then pip's pick was forced by another dropped constraint).
pip evaluates markers with this machine's Python, so the closure is walked again with the
node's marker values, and a dependency only the node's Python needs is resolved in another pass.

Exit codes: 0 built, 1 a tool failed (pip, xz; the message names the log), 2 bad input.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

try:  # farm's venv has packaging; pip's vendored copy is the same library
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement  # type: ignore
    from pip._vendor.packaging.specifiers import SpecifierSet  # type: ignore
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore
    from pip._vendor.packaging.version import InvalidVersion, Version  # type: ignore

PROG = "offline-bundle"
MIB = 1024 * 1024

# A glibc-2.39 x86_64 node (Ubuntu 24.04, the lent H200) accepts every manylinux tag up to 2.39.
# pip does not expand manylinux_2_X to lower glibc versions by itself (only manylinux2014 ->
# 2010 -> 1), so the whole list is spelled out; vLLM 0.20.2's wheel needs manylinux_2_35.
DEFAULT_PLATFORMS = ([f"manylinux_2_{minor}_x86_64" for minor in range(39, 4, -1)]
                     + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"])

PLATFORM_RE = re.compile(
    r"^(manylinux_\d+_\d+|manylinux1|manylinux2010|manylinux2014|musllinux_\d+_\d+|linux)"
    r"_(x86_64|aarch64|i686|ppc64le|s390x|armv7l)$")
PYVER_RE = re.compile(r"^3\.\d+(\.\d+)?$")

# Conflict fallback rounds: each round drops the node constraints pip names; a pinned engine
# typically needs 1-3 (numba, then llvmlite ...). More than this means something is wrong.
MAX_RESOLVE_ROUNDS = 40


class UsageError(Exception):
    """A user mistake: one line, exit 2, no traceback."""


class ToolError(Exception):
    """pip/xz failed: one line naming the log, exit 1."""


def log(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- target


@dataclass
class Target:
    python_version: str
    platforms: list[str]
    implementation: str = "cp"

    def pip_options(self) -> list[str]:
        """The options that make pip choose wheels for the node instead of this machine."""
        opts = ["--only-binary=:all:", "--python-version", self.python_version,
                "--implementation", self.implementation]
        for p in self.platforms:
            opts += ["--platform", p]
        return opts

    def marker_env(self) -> dict[str, str]:
        """PEP 508 marker values of the node. pip evaluates markers against the interpreter it
        runs in (this machine's Python), not --python-version, so the dependency closure is
        recomputed with these values (see `closure`)."""
        full = self.python_version if self.python_version.count(".") == 2 else self.python_version + ".0"
        arch = PLATFORM_RE.match(self.platforms[0]).group(2)
        return {
            "implementation_name": "cpython", "implementation_version": full,
            "os_name": "posix", "platform_machine": arch, "platform_python_implementation": "CPython",
            "platform_release": "", "platform_system": "Linux", "platform_version": "",
            "python_full_version": full, "python_version": ".".join(full.split(".")[:2]),
            "sys_platform": "linux",
        }


# ---------------------------------------------------------------- what the node has


@dataclass
class Have:
    version: str  # local label stripped: the node's +cu130 build counts as that version
    source: str  # "node-freeze.txt" or "bundle engine-vllm": for the manifest's reasons
    raw: str = ""  # as written in the file (with a local label)


def strip_local(version: str) -> str:
    return version.split("+", 1)[0]


def same_version(a: str, b: str) -> bool:
    try:
        return Version(strip_local(a)) == Version(strip_local(b))
    except InvalidVersion:
        return strip_local(a) == strip_local(b)


def parse_freeze(text: str, source: str) -> dict[str, Have]:
    """`pip freeze` / `pip list --format=freeze` lines -> {canonical name: Have}."""
    have: dict[str, Have] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-e ") or line.startswith("--"):
            continue
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*===?\s*(\S+)$", line)
        if m:
            have[canonicalize_name(m.group(1))] = Have(strip_local(m.group(2)), source, m.group(2))
            continue
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*@\s*\S+", line)
        if m:  # a direct-URL install: present, version unknown; it cannot be a constraint
            log(f"{source}:{n}: {m.group(1)} is a direct-URL install; treated as absent")
            continue
        raise UsageError(f"{source}:{n}: not a freeze line: {line!r}")
    return have


def parse_manifest_have(data: dict, source: str) -> dict[str, Have]:
    """A previous bundle's manifest: what it carries (bundled) and what it found on the node."""
    if not isinstance(data, dict) or "packages" not in data or "bundle" not in data:
        raise UsageError(f"{source}: JSON but not a bundle manifest (no 'bundle'/'packages')")
    label = f"bundle {data['bundle']}"
    have: dict[str, Have] = {}
    for p in data["packages"]:
        if p.get("status") in ("bundled", "present"):
            have[canonicalize_name(p["name"])] = Have(strip_local(p["version"]), label, p["version"])
    return have


def load_have(paths: list[str]) -> tuple[dict[str, Have], list[dict]]:
    """Merge the --have files. A later file wins for a name both list (a bundle's version shadows
    the node's on PYTHONPATH)."""
    have: dict[str, Have] = {}
    described = []
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"--have {path}: no such file")
        text = p.read_text()
        if p.suffix == ".json" or text.lstrip().startswith("{"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise UsageError(f"--have {path}: invalid JSON ({exc})") from None
            got = parse_manifest_have(data, path)
            described.append({"file": path, "kind": "manifest", "bundle": data["bundle"], "packages": len(got)})
        else:
            got = parse_freeze(text, p.name)
            described.append({"file": path, "kind": "freeze", "packages": len(got)})
        for name, h in got.items():
            # a bundle's "present" entry is the node's package: keep naming the node's file
            if name not in have or not same_version(have[name].version, h.version):
                have[name] = h
    return have, described


# ---------------------------------------------------------------- prune list


@dataclass
class PruneDist:
    name: str
    reason: str
    pulled: bool = False


@dataclass
class PruneGlob:
    glob: str
    reason: str
    optional: bool = False
    paths: int = 0
    bytes: int = 0


@dataclass
class PruneKeep:
    name: str
    reason: str
    used: bool = False
    overrides: list[str] = field(default_factory=list)


@dataclass
class PruneArch:
    glob: str
    keep_sm: list[int]
    reason: str
    files: int = 0
    entries_emptied: int = 0
    entries_kept: int = 0
    bytes: int = 0  # cubin bytes zeroed


@dataclass
class PruneList:
    file: str | None = None
    distributions: list[PruneDist] = field(default_factory=list)
    files: list[PruneGlob] = field(default_factory=list)
    keep_node: list[PruneKeep] = field(default_factory=list)
    cuda_arches: list[PruneArch] = field(default_factory=list)

    def dist_names(self) -> set[str]:
        return {canonicalize_name(d.name) for d in self.distributions}


def parse_prune(data, source: str) -> PruneList:
    """Validate a prune list; every entry needs a non-empty reason (a removal nobody can explain
    is a removal nobody can safely undo or keep)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise UsageError(f"{source}: a mapping with 'distributions' and/or 'files' expected")
    unknown = set(data) - {"distributions", "files", "keep_node", "cuda_arches"}
    if unknown:
        raise UsageError(f"{source}: unknown key(s) {', '.join(sorted(unknown))} "
                         "(allowed: distributions, files, keep_node, cuda_arches)")
    out = PruneList(file=source)
    for kind, keys in (("distributions", {"name", "reason"}), ("files", {"glob", "reason", "optional"}),
                       ("keep_node", {"name", "reason"}), ("cuda_arches", {"glob", "keep_sm", "reason"})):
        entries = data.get(kind) or []
        if not isinstance(entries, list):
            raise UsageError(f"{source}: {kind}: a list expected")
        for i, e in enumerate(entries):
            where = f"{source}: {kind}[{i}]"
            if not isinstance(e, dict):
                raise UsageError(f"{where}: a mapping expected")
            bad = set(e) - keys
            if bad:
                raise UsageError(f"{where}: unknown key(s) {', '.join(sorted(bad))} (allowed: {', '.join(sorted(keys))})")
            key = "glob" if kind in ("files", "cuda_arches") else "name"
            value = e.get(key)
            if not isinstance(value, str) or not value.strip():
                raise UsageError(f"{where}: missing {key}")
            reason = e.get("reason")
            if not isinstance(reason, str) or not reason.strip():
                raise UsageError(f"{where} ({value}): missing reason")
            if kind == "distributions":
                out.distributions.append(PruneDist(value.strip(), " ".join(reason.split())))
            elif kind == "keep_node":
                out.keep_node.append(PruneKeep(value.strip(), " ".join(reason.split())))
            elif kind == "cuda_arches":
                if value.startswith("/") or ".." in Path(value).parts:
                    raise UsageError(f"{where} ({value}): a glob relative to the tree expected")
                keep_sm = e.get("keep_sm")
                if (not isinstance(keep_sm, list) or not keep_sm
                        or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in keep_sm)):
                    raise UsageError(f"{where} ({value}): keep_sm must be a non-empty list of SM numbers, e.g. [90]")
                out.cuda_arches.append(PruneArch(value.strip(), sorted(set(keep_sm)), " ".join(reason.split())))
            else:
                if value.startswith("/") or ".." in Path(value).parts:
                    raise UsageError(f"{where} ({value}): a glob relative to the tree expected")
                optional = e.get("optional", False)
                if not isinstance(optional, bool):
                    raise UsageError(f"{where} ({value}): optional must be true or false")
                out.files.append(PruneGlob(value.strip(), " ".join(reason.split()), optional))
    return out


def load_prune(path: str | None) -> PruneList:
    if path is None:
        return PruneList()
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"--prune {path}: no such file")
    import yaml  # farm's dependency; only needed with --prune

    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: invalid YAML ({str(exc).splitlines()[0]})") from None
    return parse_prune(data, path)


# ---------------------------------------------------------------- requirements


@dataclass
class Requirements:
    specs: list[str] = field(default_factory=list)  # PEP 508 strings, as given
    local: list[Path] = field(default_factory=list)  # project dirs / wheel files


def read_requirements_file(path: str, seen: set[str] | None = None) -> list[str]:
    seen = seen or set()
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"-r {path}: no such file")
    if str(p.resolve()) in seen:
        return []
    seen.add(str(p.resolve()))
    out = []
    for n, line in enumerate(p.read_text().splitlines(), 1):
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ")):
            nested = line.split(None, 1)[1]
            out += read_requirements_file(str((p.parent / nested)), seen)
        elif line.startswith("-"):
            raise UsageError(f"{path}:{n}: options are not supported here: {line!r}")
        else:
            out.append(line)
    return out


def is_local_path(spec: str) -> bool:
    return spec in (".", "..") or spec.startswith(("./", "../", "/")) or spec.endswith(".whl") \
        or ("/" in spec and Path(spec).exists())


def classify_requirements(specs: list[str]) -> Requirements:
    reqs = Requirements()
    for spec in specs:
        if is_local_path(spec):
            p = Path(spec)
            if p.is_file() and p.suffix == ".whl":
                reqs.local.append(p.resolve())
            elif p.is_dir() and ((p / "pyproject.toml").is_file() or (p / "setup.py").is_file()):
                reqs.local.append(p.resolve())
            else:
                raise UsageError(f"requirement {spec}: not a wheel or a project directory")
            continue
        try:
            Requirement(spec)
        except InvalidRequirement as exc:
            raise UsageError(f"requirement {spec!r}: {str(exc).splitlines()[0]}") from None
        reqs.specs.append(spec)
    if not reqs.specs and not reqs.local:
        raise UsageError("no requirements given (positional specs, -r FILE, or a project path like .)")
    return reqs


# ---------------------------------------------------------------- running pip


def run_logged(cmd: list[str], logfile: Path, what: str) -> subprocess.CompletedProcess:
    """Run a tool with its whole output appended to a log; the caller decides what a failure
    means (a resolver conflict is an expected failure)."""
    with logfile.open("a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    with logfile.open("a") as fh:
        fh.write(proc.stdout + proc.stderr + f"[exit {proc.returncode}]\n")
    return proc


def pip_error_line(output: str) -> str:
    """The most telling line of a pip failure, for a one-line message."""
    errors = [ln.strip() for ln in output.splitlines() if ln.startswith("ERROR:")
              and not ln.startswith(("ERROR: Ignored the following", "ERROR: ResolutionImpossible"))]
    line = errors[-1] if errors else (output.strip().splitlines() or ["(no output)"])[-1]
    return line if len(line) <= 300 else line[:300] + " ..."


def pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", *args]


def build_local_wheels(paths: list[Path], wheel_dir: Path, logfile: Path) -> list[Path]:
    """A project directory (farm itself) becomes a wheel first: pip then resolves its metadata
    like any other package's, and the node needs no build backend."""
    wheels = []
    for p in paths:
        if p.is_file():
            wheels.append(p)
            continue
        out = wheel_dir / p.name
        out.mkdir(parents=True, exist_ok=True)
        log(f"building a wheel of {p}")
        proc = run_logged(pip("wheel", "--no-deps", "--wheel-dir", str(out), str(p)), logfile, "pip wheel")
        built = sorted(out.glob("*.whl"))
        if proc.returncode != 0 or not built:
            raise ToolError(f"pip wheel {p} failed: {pip_error_line(proc.stdout + proc.stderr)} (log: {logfile})")
        wheels.append(built[-1])
    return wheels


def wheel_requirements(wheel: Path, env: dict[str, str]) -> list[str]:
    """A wheel's Requires-Dist that apply on the target (no extras): the probes for a failed
    resolve of a local project."""
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        text = zf.read(meta).decode()
    out = []
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
                req.marker = None
                out.append(str(req))
        elif not line.strip():
            break  # the body (README) starts
    return out


CONSTRAINT_CONFLICT_RE = re.compile(r"The user requested \(constraint\) ([A-Za-z0-9][A-Za-z0-9._-]*)")
NO_MATCH_RE = re.compile(r"No matching distribution found for ([A-Za-z0-9][A-Za-z0-9._-]*)")


def conflicting_constraints(pip_output: str, constraints: set[str]) -> list[str]:
    """The node constraints a failed resolve blames (canonical names, in order). Empty when the
    failure is not about a node constraint (a typo, a package without a wheel for the target):
    then there is nothing to fall back to and the caller reports pip's error."""
    found = []
    for rx in (CONSTRAINT_CONFLICT_RE, NO_MATCH_RE):
        for m in rx.finditer(pip_output):
            name = canonicalize_name(m.group(1))
            if name in constraints and name not in found:
                found.append(name)
    return found


def resolve_with_fallback(run_resolver, have: dict[str, Have], dropped: dict[str, str] | None = None,
                          probes: list[str] = (), max_rounds: int = MAX_RESOLVE_ROUNDS) -> tuple[dict, dict[str, str]]:
    """Resolve with the node's packages as `name==version` constraints; when pip says a
    requirement needs another version than the node has, drop that constraint (the package will
    be bundled) and retry. `run_resolver(constraints: dict[name, version]) -> (ok, report|output)`
    is the side effect, so this loop is testable without pip. Returns the report and
    {name: reason} of the dropped constraints.

    With many requirements pip's backtracking can end on a message that names no constraint
    (ray[default] needing a newer aiohttp than the node's came out as "cannot install mlflow");
    then each probe (a top-level requirement) is resolved alone, `run_resolver(c, only=[probe])`,
    to find the constraints they conflict with."""
    dropped = dict(dropped or {})  # a second pass starts from the first one's findings
    for _ in range(max_rounds):
        active = {n: h.version for n, h in have.items() if n not in dropped}
        ok, result = run_resolver(active)
        if ok:
            return result, dropped
        names = conflicting_constraints(result, set(active))
        if not names and len(probes) > 1:
            log(f"pip named no node constraint; resolving the {len(probes)} top-level requirements one by one")
            for probe in probes:
                ok_p, res_p = run_resolver(active, only=[probe])
                if not ok_p:
                    names += [n for n in conflicting_constraints(res_p, set(active)) if n not in names]
        if not names:
            raise ToolError(f"resolving failed: {pip_error_line(result)}")
        for n in names:
            h = have[n]
            dropped[n] = f"bundled: {h.source} has {n}=={h.raw or h.version}, requirements need other"
            log(f"conflict: the requirements need another {n} than {h.source}'s {h.raw or h.version}; "
                "resolving without that constraint")
    raise ToolError(f"resolving failed: still conflicting after {max_rounds} rounds of dropping node constraints")


def pip_resolver(reqs: list[str], target: Target, work: Path, logfile: Path, extra_constraints: list[str] = ()):
    """pip's own resolver, for the node: `install --dry-run --report` with the target's tags."""
    def run(constraints: dict[str, str], only: list[str] | None = None):
        cfile = work / "constraints.txt"
        cfile.write_text("".join(f"{n}=={v}\n" for n, v in sorted(constraints.items())))
        report = work / "report.json"
        report.unlink(missing_ok=True)
        cmd = pip("install", "--dry-run", "--ignore-installed", "--report", str(report),
                  *target.pip_options(), "-c", str(cfile), *[a for c in extra_constraints for a in ("-c", c)],
                  *(only or reqs))
        if not only:
            log(f"resolving {len(reqs)} requirement(s) for Python {target.python_version} with {len(constraints)} node constraint(s)")
        proc = run_logged(cmd, logfile, "pip install --dry-run")
        if proc.returncode == 0 and report.is_file():
            return True, json.loads(report.read_text())
        return False, proc.stdout + proc.stderr
    return run


# ---------------------------------------------------------------- closure for the target


@dataclass
class Closure:
    needed: set[str]  # canonical names the node needs
    missing: list[str]  # requirements the walk needs that pip did not resolve
    edges: dict[str, list[tuple[str, str]]]  # dep -> [(parent "name version", specifier)]


def closure(items: dict[str, dict], roots: dict[str, set[str]], env: dict[str, str],
            excluded: set[str], opaque: set[str] = frozenset()) -> Closure:
    """The packages the node needs: walk Requires-Dist from the roots with the *node's* marker
    values (pip used this machine's), not entering excluded (pruned) distributions, so what only
    a pruned package needs is left out too. An `opaque` package (the node's own version is kept)
    is needed but not entered: its dependencies are the node's business, already satisfied there.
    `missing`: a dependency whose marker is true only on the node's Python never reached pip."""
    needed: set[str] = set()
    done_extras: dict[str, set[str]] = {}
    missing: set[str] = set()
    edges: dict[str, list[tuple[str, str]]] = {}
    queue = [(n, set(e)) for n, e in roots.items()]
    while queue:
        name, extras = queue.pop()
        if name in excluded or name not in items:
            continue
        item = items[name]
        new = ({""} | extras) - done_extras.get(name, set())
        if name in needed and not new:
            continue
        needed.add(name)
        done_extras.setdefault(name, set()).update(new)
        if name in opaque:
            continue
        parent = f"{item['metadata']['name']} {item['metadata']['version']}"
        for spec in item["metadata"].get("requires_dist") or []:
            req = Requirement(spec)
            if req.marker is not None and not any(
                    req.marker.evaluate({**env, "extra": e}) for e in new):
                continue
            dep = canonicalize_name(req.name)
            if dep in excluded:
                continue
            if dep not in items:
                extras_s = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
                missing.add(f"{req.name}{extras_s}{req.specifier}")
                continue
            if (parent, str(req.specifier)) not in edges.setdefault(dep, []):
                edges[dep].append((parent, str(req.specifier)))
            queue.append((dep, set(req.extras)))
    return Closure(needed, sorted(missing), edges)


def node_version_fits(version: str, wanted: list[tuple[str, str]]) -> bool:
    """Does the node's version satisfy every specifier the needed packages put on it? Then it is
    used even where pip picked another version (pip's pick was forced by a dropped constraint
    elsewhere, or by nothing at all)."""
    try:
        v = Version(strip_local(version))
    except InvalidVersion:
        return False
    return all(SpecifierSet(spec).contains(v, prereleases=True) for _, spec in wanted)


def report_items(report: dict) -> dict[str, dict]:
    return {canonicalize_name(i["metadata"]["name"]): i for i in report["install"]}


# ---------------------------------------------------------------- plan


@dataclass
class Package:
    name: str
    version: str
    status: str  # bundled | present | pruned | unused
    reason: str = ""
    url: str = ""
    wheel_bytes: int = 0

    def as_json(self) -> dict:
        d = {"name": self.name, "version": self.version, "status": self.status}
        if self.reason:
            d["reason"] = self.reason
        if self.wheel_bytes:
            d["wheel_bytes"] = self.wheel_bytes
        return d


def plan_packages(items: dict[str, dict], cl: Closure, have: dict[str, Have],
                  dropped: dict[str, str], prune: PruneList) -> list[Package]:
    """Missing = needed minus what the node (or an earlier bundle) has in a version that fits:
    the same version pip resolved, or one that satisfies every specifier of the needed packages,
    or one the prune list keeps on purpose (keep_node)."""
    pruned = prune.dist_names()
    keep = {canonicalize_name(k.name): k for k in prune.keep_node}
    out = []
    for key in sorted(items):
        item = items[key]
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        url = (item.get("download_info") or {}).get("url", "")
        h = have.get(key)
        wanted = cl.edges.get(key, [])
        if key in pruned:
            d = next(d for d in prune.distributions if canonicalize_name(d.name) == key)
            d.pulled = True
            out.append(Package(name, version, "pruned", d.reason))
        elif key not in cl.needed:
            out.append(Package(name, version, "unused",
                               "not needed on the target (a marker false there, or only pruned/kept packages need it)"))
        elif h and same_version(h.version, version):
            out.append(Package(name, version, "present", f"{h.source} has {h.raw or version}"))
        elif key in keep:
            if h is None:
                raise UsageError(f"{prune.file}: keep_node {name}: the node does not have it (--have)")
            keep[key].used = True
            unmet = [f"{p} requires {name}{spec}" for p, spec in wanted if not node_version_fits(h.version, [(p, spec)])]
            keep[key].overrides = unmet
            out.append(Package(name, h.raw or h.version, "present",
                               f"{h.source}'s {name}=={h.raw or h.version} kept over "
                               f"{'; '.join(unmet) or 'pip pick ' + version}: {keep[key].reason}"))
        elif h and node_version_fits(h.version, wanted):
            out.append(Package(name, h.raw or h.version, "present",
                               f"{h.source} has {h.raw or h.version}, which fits every requirement on it (pip picked {version})"))
        else:
            reason = dropped.get(key, "")
            if h and not reason:
                reason = f"bundled: {h.source} has {name}=={h.raw}, requirements need other"
            if h:
                unmet = [f"{p} requires {name}{spec}" for p, spec in wanted if not node_version_fits(h.version, [(p, spec)])]
                if unmet:
                    reason += f" ({'; '.join(unmet)})"
            out.append(Package(name, version, "bundled", reason, url))
    return out


# ---------------------------------------------------------------- download, install, prune


def download_wheels(pkgs: list[Package], target: Target, wheel_dir: Path, logfile: Path) -> list[Path]:
    """The bundled packages' wheels into wheel_dir (a kept --work dir is reused: pip skips files
    already there), returning exactly the planned ones (an older run's extra wheels stay out)."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    index_reqs = []
    for p in pkgs:
        if p.url.startswith("file://"):  # a wheel built here (farm) or on a local index
            src = Path(p.url[len("file://"):])
            shutil.copy2(src, wheel_dir / src.name)
        else:
            index_reqs.append(f"{p.name}=={p.version}")
    if index_reqs:
        log(f"downloading {len(index_reqs)} wheel(s)")
        proc = run_logged(pip("download", "--no-deps", "--dest", str(wheel_dir), *target.pip_options(),
                              *index_reqs), logfile, "pip download")
        if proc.returncode != 0:
            raise ToolError(f"pip download failed: {pip_error_line(proc.stdout + proc.stderr)} (log: {logfile})")
    found = {}
    for w in wheel_dir.glob("*.whl"):
        name, version = w.name.split("-")[:2]
        found[(canonicalize_name(name), strip_local(version))] = w
    wheels = []
    for p in pkgs:
        w = next((w for (n, v), w in found.items()
                  if n == canonicalize_name(p.name) and same_version(v, p.version)), None)
        if w is None:
            raise ToolError(f"no wheel of {p.name}=={p.version} after download (log: {logfile})")
        p.wheel_bytes = w.stat().st_size
        wheels.append(w)
    return wheels


def install_tree(wheel_paths: list[Path], tree: Path, target: Target, logfile: Path) -> None:
    """--no-deps: the plan already is the full set, and a pruned distribution that another
    package Requires-Dist must not be pulled back in (nor does pip fail over it). --no-compile:
    .pyc of this machine's Python would be dead weight for the node's."""
    wheels = sorted(str(w) for w in wheel_paths)
    log(f"installing {len(wheels)} wheel(s) into the tree")
    proc = run_logged(pip("install", "--no-deps", "--no-compile", "--no-index", "--target", str(tree),
                          *target.pip_options(), *wheels), logfile, "pip install --target")
    if proc.returncode != 0:
        raise ToolError(f"pip install --target failed: {pip_error_line(proc.stdout + proc.stderr)} (log: {logfile})")
    fix_script_shebangs(tree)


def fix_script_shebangs(tree: Path) -> None:
    """pip writes console scripts (bin/vllm, bin/ray ...) with this machine's interpreter in the
    shebang; on the node that path does not exist, its python3 does."""
    bindir = tree / "bin"
    if not bindir.is_dir():
        return
    for script in bindir.iterdir():
        if not script.is_file():
            continue
        data = script.read_bytes()
        if data.startswith(b"#!") and b"python" in data.split(b"\n", 1)[0]:
            rest = data.split(b"\n", 1)[1] if b"\n" in data else b""
            script.write_bytes(b"#!/usr/bin/env python3\n" + rest)


def path_bytes(p: Path) -> int:
    if p.is_symlink() or p.is_file():
        return p.lstat().st_size
    return sum(f.lstat().st_size for f in p.rglob("*") if f.is_file() or f.is_symlink())


def apply_prune_globs(tree: Path, prune: PruneList) -> None:
    """Remove what the file globs match; a non-optional glob that matches nothing fails the build
    (the package moved or renamed the file: the list is stale and should be looked at)."""
    stale = []
    for g in prune.files:
        matches = sorted(tree.glob(g.glob))
        for m in matches:
            if not (m.exists() or m.is_symlink()):
                continue  # inside a directory an earlier match removed
            g.bytes += path_bytes(m)
            g.paths += 1
            if m.is_dir() and not m.is_symlink():
                shutil.rmtree(m)
            else:
                m.unlink()
        log(f"prune {g.glob}: {g.paths} path(s), {g.bytes / MIB:.1f} MiB")
        if g.paths == 0 and not g.optional:
            stale.append(g.glob)
    if stale:
        raise UsageError(f"{prune.file}: file glob(s) matched nothing (stale prune list? mark optional: true): {', '.join(stale)}")


FATBIN_MAGIC = 0xBA55ED50
FATBIN_KIND_PTX, FATBIN_KIND_CUBIN = 1, 2


def fatbin_entries(data) -> list[tuple[int, int, int, int]]:
    """(kind, sm, payload offset, payload bytes) of every entry in an ELF64 library's `.nv_fatbin`
    section. The layout is nvcc's fatbin container: a 16-byte header (magic 0xBA55ED50, version,
    header size, size of the entries that follow), then entries whose header holds the kind
    (u16 at 0: 1 PTX, 2 cubin), the header size (u32 at 4), the padded payload size (u64 at 8)
    and the SM number (u32 at 28). Raises ValueError where the bytes are not that."""
    import struct

    if bytes(data[:6]) != b"\x7fELF\x02\x01":
        raise ValueError("not a little-endian ELF64 file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = sections[shstrndx][4]

    def name(off: int) -> bytes:
        start = strtab + off
        return bytes(data[start:data.find(b"\0", start)])

    fatbins = [s for s in sections if name(s[0]) == b".nv_fatbin"]
    if not fatbins:
        raise ValueError("no .nv_fatbin section")
    out = []
    for _, _, _, _, off, size in fatbins:
        end = off + size
        while off + 16 <= end:
            magic, _version, hsize, fsize = struct.unpack_from("<IHHQ", data, off)
            if magic != FATBIN_MAGIC:  # containers are 8-byte aligned; padding between them
                off += 8
                continue
            entry, entries_end = off + hsize, off + hsize + fsize
            if entries_end > end:
                raise ValueError(f"fatbin container at {off} runs past its section")
            while entry < entries_end:
                kind, _v, ehsize, payload = struct.unpack_from("<HHIQ", data, entry)
                sm = struct.unpack_from("<I", data, entry + 28)[0]
                if ehsize < 32 or entry + ehsize + payload > entries_end:
                    raise ValueError(f"fatbin entry at {entry} has impossible sizes")
                out.append((kind, sm, entry + ehsize, payload))
                entry += ehsize + payload
            off = entries_end
    return out


def empty_other_arches(path: Path, keep_sm: list[int]) -> tuple[int, int, int]:
    """Zero, in place, the payload of every cubin in `path` whose SM is not in `keep_sm`.
    Returns (entries emptied, entries kept, bytes zeroed). PTX stays: a driver JIT-compiles
    PTX of an older architecture for a newer GPU, so it may be the only code some GPU can run."""
    import mmap
    import struct

    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as data:
        try:
            entries = fatbin_entries(data)
        except (ValueError, IndexError, OverflowError, struct.error) as exc:
            raise UsageError(f"cuda_arches {path.name}: {exc}") from None
        kept = [e for e in entries if e[0] != FATBIN_KIND_CUBIN or e[1] in keep_sm]
        if not any(e[0] == FATBIN_KIND_CUBIN and e[1] in keep_sm for e in entries):
            sms = sorted({e[1] for e in entries if e[0] == FATBIN_KIND_CUBIN})
            raise UsageError(f"cuda_arches {path.name}: no cubin for sm {keep_sm} (it has sm {sms}); "
                             "emptying the others would leave nothing to run")
        zeroed = emptied = 0
        for kind, sm, off, size in entries:
            if kind == FATBIN_KIND_CUBIN and sm not in keep_sm:
                data[off:off + size] = bytes(size)
                zeroed += size
                emptied += 1
        data.flush()
    return emptied, len(kept), zeroed


def apply_cuda_arches(tree: Path, prune: PruneList) -> None:
    stale = []
    for a in prune.cuda_arches:
        for m in sorted(tree.glob(a.glob)):
            if not m.is_file() or m.is_symlink():
                continue
            emptied, kept, zeroed = empty_other_arches(m, a.keep_sm)
            a.files += 1
            a.entries_emptied += emptied
            a.entries_kept += kept
            a.bytes += zeroed
        log(f"cuda_arches {a.glob}: {a.files} file(s), {a.entries_emptied} cubin(s) of other SMs emptied "
            f"({a.bytes / MIB:.1f} MiB), {a.entries_kept} kept for sm {a.keep_sm}")
        if a.files == 0:
            stale.append(a.glob)
    if stale:
        raise UsageError(f"{prune.file}: cuda_arches glob(s) matched nothing (stale prune list?): {', '.join(stale)}")


def tree_bytes(tree: Path) -> tuple[int, int]:
    size = files = 0
    for f in tree.rglob("*"):
        if f.is_file() and not f.is_symlink():
            size += f.stat().st_size
            files += 1
    return size, files


# ---------------------------------------------------------------- pack


def _tar_into(tree: Path, fileobj) -> None:
    """A tar of the tree with sorted names and neutral owners, so the same tree packs the same."""
    def neutral(ti: tarfile.TarInfo) -> tarfile.TarInfo:
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        return ti

    with tarfile.open(fileobj=fileobj, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, files in os.walk(tree):
            dirs.sort()
            for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
                full = Path(root) / name
                tar.add(full, arcname=str(full.relative_to(tree)), recursive=False, filter=neutral)
            for d in dirs:
                full = Path(root) / d
                if not full.is_symlink():
                    tar.add(full, arcname=str(full.relative_to(tree)), recursive=False, filter=neutral)


class PartWriter:
    """Splits a byte stream into numbered files of at most `limit` bytes, hashing as it goes."""

    def __init__(self, out: Path, stem: str, limit: int):
        self.out, self.stem, self.limit = out, stem, limit
        self.parts: list[dict] = []
        self._fh = None
        self._left = 0

    def _open(self):
        name = f"{self.stem}.tar.xz.part{len(self.parts):03d}"
        self._fh = (self.out / name).open("wb")
        self._hash = hashlib.sha256()
        self.parts.append({"file": name, "size": 0})
        self._left = self.limit

    def write(self, data: bytes) -> None:
        while data:
            if self._fh is None or self._left == 0:
                self._close()
                self._open()
            chunk, data = data[:self._left], data[self._left:]
            self._fh.write(chunk)
            self._hash.update(chunk)
            self._left -= len(chunk)
            self.parts[-1]["size"] += len(chunk)

    def _close(self):
        if self._fh is not None:
            self._fh.close()
            self.parts[-1]["sha256"] = self._hash.hexdigest()
            self._fh = None

    def close(self) -> list[dict]:
        self._close()
        return self.parts


def pack(tree: Path, out: Path, stem: str, part_bytes: int) -> list[dict]:
    """tar | xz -9 | split, streamed: the whole archive never lies on disk in one piece.
    `xz -9 -T0` (all cores) when there is an xz, else Python's lzma at preset 9 (one core)."""
    writer = PartWriter(out, stem, part_bytes)
    xz = shutil.which("xz")
    if xz:
        proc = subprocess.Popen([xz, "-9", "-T0", "-c"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        failure: list[BaseException] = []

        def feed():
            try:
                _tar_into(tree, proc.stdin)
            except BaseException as exc:  # reported by the main thread
                failure.append(exc)
            finally:
                proc.stdin.close()

        t = threading.Thread(target=feed, daemon=True)
        t.start()
        while chunk := proc.stdout.read(MIB):
            writer.write(chunk)
        t.join()
        if proc.wait() != 0 or failure:
            raise ToolError(f"packing failed: {failure[0] if failure else f'xz exit {proc.returncode}'}")
    else:
        import lzma

        class _Sink:
            def __init__(self):
                self.c = lzma.LZMACompressor(preset=9)

            def write(self, b):
                writer.write(self.c.compress(b))
                return len(b)

            def flush_all(self):
                writer.write(self.c.flush())

        sink = _Sink()
        _tar_into(tree, sink)
        sink.flush_all()
    return writer.close()


# ---------------------------------------------------------------- install.sh


def sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def render_install_sh(manifest: dict) -> str:
    """POSIX sh for the node: only sha256sum, xz, tar and python3. Every failure is one line on
    stderr and a non-zero exit; tool chatter goes to a log whose last line the message quotes."""
    name = manifest["bundle"]
    parts = manifest["parts"]
    deps = manifest.get("needs_on_pythonpath") or []
    dep_hint = (f" (this bundle expects bundle(s) {', '.join(deps)} on PYTHONPATH: "
                f"PYTHONPATH=<their tree> sh install.sh TARGET_DIR)") if deps else ""
    checks = "\n".join(f"check {sh_quote(p['file'])} {p['sha256']} {p['size']}" for p in parts)
    files = " ".join(f'"$HERE"/{sh_quote(p["file"])}' for p in parts)
    imports = "\n".join(f"import_check {sh_quote(m)}" for m in manifest["import_checks"])
    return f"""#!/bin/sh
# Installs the offline bundle {name} (made by scripts/offline-bundle.py; see manifest.json).
# usage: sh install.sh TARGET_DIR    then use it with PYTHONPATH=TARGET_DIR (and TARGET_DIR/bin on PATH)
# Needs only sha256sum, xz, tar and python3. Exits non-zero with one line on any failure.
set -u
die() {{ echo "install.sh ({name}): $*" >&2; exit 1; }}
[ $# -eq 1 ] || die "usage: sh install.sh TARGET_DIR"
HERE=$(cd "$(dirname "$0")" && pwd) || die "cannot find the bundle's directory"
for tool in sha256sum xz tar python3; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found on PATH"
done
LOG=$(mktemp) || die "mktemp failed"
trap 'rm -f "$LOG" "$LOG.st"' EXIT

# Every part against the sha256 recorded when the bundle was made: a truncated or damaged copy
# stops here, before anything is unpacked.
check() {{
  [ -f "$HERE/$1" ] || die "missing part $1 (expected beside install.sh)"
  size=$(wc -c <"$HERE/$1" | tr -d ' ')
  [ "$size" = "$3" ] || die "part $1 is $size bytes, expected $3 (incomplete copy?)"
  sum=$(sha256sum "$HERE/$1" | cut -d' ' -f1)
  [ "$sum" = "$2" ] || die "part $1: sha256 mismatch (corrupt copy): got $sum, expected $2"
}}
{checks}

TARGET=$1
if [ -d "$TARGET" ] && [ -n "$(ls -A "$TARGET" 2>/dev/null)" ]; then
  die "$TARGET is not empty: unpack into a new directory (old files would mix with the new ones)"
fi
mkdir -p "$TARGET" || die "cannot create $TARGET"
TARGET=$(cd "$TARGET" && pwd) || die "cannot enter $TARGET"

# sh has no pipefail: each stage notes its own failure in $LOG.st.
: >"$LOG.st"
{{ cat {files} || echo cat >>"$LOG.st"; }} \\
  | {{ xz -d 2>>"$LOG" || echo xz >>"$LOG.st"; }} \\
  | {{ tar -x -C "$TARGET" 2>>"$LOG" || echo tar >>"$LOG.st"; }}
if [ -s "$LOG.st" ]; then
  die "unpacking failed ($(tr '\\n' ' ' <"$LOG.st" | sed 's/ $//')): $(tail -n 1 "$LOG")"
fi

# From inside the tree: `python3 -c` puts the current directory first on sys.path, and a
# checkout there (farm's own repo) would pass the check for a module the tree lacks.
import_check() {{
  where=$(cd "$TARGET" && PYTHONPATH="$TARGET${{PYTHONPATH:+:$PYTHONPATH}}" python3 -c \\
    "import importlib, sys; m = importlib.import_module(sys.argv[1]); print(getattr(m, '__file__', None) or '(namespace)')" \\
    "$1" 2>"$LOG") || die "import check failed: $1: $(tail -n 1 "$LOG"){dep_hint}"
  echo "import $1: ok ($where)"
}}
{imports}
echo "{name}: installed into $TARGET ({len(parts)} part(s)); use PYTHONPATH=$TARGET"
"""


# ---------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("requirements", nargs="*", help="PEP 508 specs, or a project path like . (built into a wheel)")
    ap.add_argument("-r", "--requirement", action="append", default=[], metavar="FILE",
                    help="a requirements file (specs and paths, one a line)")
    ap.add_argument("--name", required=True, help="bundle name (parts are NAME.tar.xz.partNNN)")
    ap.add_argument("--out", required=True, help="the bundle goes to OUT/NAME/ (replaced if there)")
    ap.add_argument("--python-version", default="3.12", help="the node's Python (default 3.12)")
    ap.add_argument("--platform", action="append", default=[], metavar="TAG",
                    help="a platform tag the node accepts (repeatable; default: glibc 2.39 x86_64, "
                         "manylinux_2_39_x86_64 ... manylinux1_x86_64)")
    ap.add_argument("--have", action="append", default=[], metavar="FILE",
                    help="pip freeze of the node, or a previous bundle's manifest.json (repeatable)")
    ap.add_argument("-c", "--constraint", action="append", default=[], metavar="FILE",
                    help="extra pip constraints for the resolution, e.g. to steer around a broken release (repeatable)")
    ap.add_argument("--prune", metavar="FILE", help="a prune list (YAML; see the top of this script)")
    # 36, not the 64 MiB transfer limit less a margin: every device call also carries the checkout
    # (19 MB on 2026-12-06, 11 MB of it bench/h200/store.tgz, and growing): a 48 MiB part beside it
    # passes 64 MiB (bench/h200/README-bundles.md); `--resplit` cuts a built bundle again
    ap.add_argument("--part-mib", type=float, default=36.0, help="largest part, MiB (default 36; fractions allowed)")
    ap.add_argument("--import-check", action="append", default=[], metavar="MODULE",
                    help="a module install.sh imports on the node (repeatable)")
    ap.add_argument("--work", metavar="DIR", help="keep wheels, tree and pip's log here (default: a temp dir, removed on success)")
    return ap.parse_args(argv)


def validate(args: argparse.Namespace) -> Target:
    if not PYVER_RE.match(args.python_version):
        raise UsageError(f"--python-version {args.python_version!r}: expected like 3.12 or 3.12.3")
    for p in args.platform:
        if not PLATFORM_RE.match(p):
            raise UsageError(f"--platform {p!r}: not a Linux platform tag like manylinux_2_39_x86_64")
    platforms = args.platform or DEFAULT_PLATFORMS
    if len({PLATFORM_RE.match(p).group(2) for p in platforms}) > 1:
        raise UsageError("--platform: tags of more than one architecture")
    if not (args.part_mib > 0):
        raise UsageError(f"--part-mib {args.part_mib}: must be positive")
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", args.name):
        raise UsageError(f"--name {args.name!r}: letters, digits, . _ - only")
    for m in args.import_check:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$", m):
            raise UsageError(f"--import-check {m!r}: not a module name")
    return Target(args.python_version, platforms)


def build(args: argparse.Namespace) -> dict:
    target = validate(args)
    have, have_files = load_have(args.have)
    for c in args.constraint:
        if not Path(c).is_file():
            raise UsageError(f"--constraint {c}: no such file")
    constraint_texts = [Path(c).read_text() for c in args.constraint]  # for the manifest
    prune = load_prune(args.prune)
    specs = list(args.requirements)
    for f in args.requirement:
        specs += read_requirements_file(f)
    reqs = classify_requirements(specs)
    for s in reqs.specs:
        if canonicalize_name(Requirement(s).name) in prune.dist_names():
            raise UsageError(f"requirement {s} is in the prune list's distributions")

    out = Path(args.out) / args.name
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix=f"{args.name}-", dir=args.out if Path(args.out).is_dir() else None))
    work.mkdir(parents=True, exist_ok=True)
    logfile = work / "pip.log"
    log(f"work dir {work} (pip's output: {logfile})")

    local_wheels = build_local_wheels(reqs.local, work / "local", logfile)
    pip_reqs = reqs.specs + [str(w) for w in local_wheels]
    probes = reqs.specs + [r for w in local_wheels for r in wheel_requirements(w, target.marker_env())]

    # Resolve; then redo the closure with the node's markers. A dependency whose marker is true
    # only on the node's Python is missing from pip's answer: add it as a requirement, again.
    extra: list[str] = []
    dropped: dict[str, str] = {}
    env = target.marker_env()
    keep = {canonicalize_name(k.name) for k in prune.keep_node}
    for _ in range(5):
        try:
            resolver = pip_resolver(pip_reqs + extra, target, work, logfile, [str(Path(c).resolve()) for c in args.constraint])
            report, dropped = resolve_with_fallback(resolver, have, dropped, probes)
        except ToolError as exc:
            raise ToolError(f"{exc} (log: {logfile})") from None
        items = report_items(report)
        roots = {canonicalize_name(i["metadata"]["name"]): set(i.get("requested_extras") or [])
                 for i in report["install"] if i.get("requested")}
        for e in extra:  # added by us, not the user's roots
            roots.pop(canonicalize_name(Requirement(e).name), None)
        cl = closure(items, roots, env, prune.dist_names(), keep)
        missing = cl.missing
        if not missing:
            break
        log(f"needed on Python {target.python_version} but not resolved here: {', '.join(missing)}; resolving again")
        extra = sorted(set(extra) | set(missing))
    else:
        raise ToolError(f"dependencies for the target still unresolved: {', '.join(missing)}")

    pkgs = plan_packages(items, cl, have, dropped, prune)
    bundled = [p for p in pkgs if p.status == "bundled"]
    if not bundled:
        raise UsageError("nothing to bundle: the node has every package at the required version")
    wheel_paths = download_wheels(bundled, target, work / "wheels", logfile)
    tree = work / "tree"
    if tree.exists():
        shutil.rmtree(tree)
    install_tree(wheel_paths, tree, target, logfile)
    before, _ = tree_bytes(tree)
    apply_prune_globs(tree, prune)
    apply_cuda_arches(tree, prune)
    after, nfiles = tree_bytes(tree)

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    log(f"packing {after / MIB:.0f} MiB ({nfiles} files) with xz -9 into parts of at most {args.part_mib:g} MiB")
    parts = pack(tree, out, args.name, int(args.part_mib * MIB))

    manifest = {
        "bundle": args.name,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "made_by": "scripts/offline-bundle.py",
        "target": {"python_version": target.python_version, "implementation": target.implementation,
                   "platforms": target.platforms},
        "requirements": reqs.specs + [str(p) for p in reqs.local],
        "constraints": constraint_texts,
        "have": have_files,
        "needs_on_pythonpath": sorted({h["bundle"] for h in have_files if h["kind"] == "manifest"}),
        "counts": {s: sum(p.status == s for p in pkgs) for s in ("bundled", "present", "pruned", "unused")},
        "conflicts": [p.reason for p in pkgs if p.status == "bundled" and p.reason],
        "kept_from_node": [p.reason for p in pkgs if p.status == "present" and "kept over" in p.reason],
        "packages": [p.as_json() for p in pkgs],
        "prune": {
            "file": prune.file,
            "distributions": [{"name": d.name, "reason": d.reason, "pulled": d.pulled} for d in prune.distributions],
            "files": [{"glob": g.glob, "reason": g.reason, "optional": g.optional, "paths": g.paths,
                       "bytes": g.bytes} for g in prune.files],
            "keep_node": [{"name": k.name, "reason": k.reason, "used": k.used, "overrides": k.overrides}
                          for k in prune.keep_node],
            "cuda_arches": [{"glob": a.glob, "keep_sm": a.keep_sm, "reason": a.reason, "files": a.files,
                             "entries_emptied": a.entries_emptied, "entries_kept": a.entries_kept,
                             "bytes_zeroed": a.bytes} for a in prune.cuda_arches],
        },
        "sizes": {"wheels_bytes": sum(p.wheel_bytes for p in bundled), "tree_bytes_before_prune": before,
                  "tree_bytes": after, "tree_files": nfiles, "xz_bytes": sum(p["size"] for p in parts),
                  "part_limit_bytes": int(args.part_mib * MIB)},
        "parts": parts,
        "import_checks": args.import_check,
        "install": "sh install.sh TARGET_DIR",
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (out / "install.sh").write_text(render_install_sh(manifest))
    (out / "install.sh").chmod(0o755)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return manifest


def summary(m: dict) -> str:
    s, c = m["sizes"], m["counts"]
    lines = [
        f"{m['bundle']}: {c['bundled']} packages bundled ({c['present']} present on the node, "
        f"{c['pruned']} pruned, {c['unused']} unused on the target)",
        f"  wheels {s['wheels_bytes'] / MIB:.1f} MiB, tree {s['tree_bytes'] / MIB:.1f} MiB "
        f"(before prune {s['tree_bytes_before_prune'] / MIB:.1f}), xz {s['xz_bytes'] / MIB:.1f} MiB "
        f"in {len(m['parts'])} part(s): " + ", ".join(f"{p['file']} {p['size'] / MIB:.1f} MiB" for p in m["parts"]),
    ]
    for g in m["prune"]["files"]:
        lines.append(f"  pruned {g['glob']}: {g['bytes'] / MIB:.1f} MiB")
    for a in m["prune"].get("cuda_arches", []):
        lines.append(f"  emptied {a['bytes_zeroed'] / MIB:.1f} MiB of cubins for other SMs than {a['keep_sm']} "
                     f"in {a['glob']}")
    for r in m["conflicts"] + m["kept_from_node"]:
        lines.append(f"  {r}")
    return "\n".join(lines)


def resplit(bundle: Path, part_bytes: int) -> dict:
    """A built bundle cut again into parts of at most `part_bytes`: the same archive, byte for byte
    (checked against the old parts' hashes as it is read), new part files, manifest and install.sh.
    For when the tree that travels beside each part grew (every device call carries the checkout)."""
    manifest_path = bundle / "manifest.json"
    if not manifest_path.is_file():
        raise UsageError(f"--resplit {bundle}: no manifest.json there (not a bundle directory)")
    manifest = json.loads(manifest_path.read_text())
    old = manifest["parts"]
    for part in old:
        f = bundle / part["file"]
        if not f.is_file() or f.stat().st_size != part["size"]:
            raise ToolError(f"--resplit {bundle}: part {part['file']} is missing or not {part['size']} bytes")
    stage = Path(tempfile.mkdtemp(prefix=".resplit-", dir=bundle))
    try:
        writer = PartWriter(stage, manifest["bundle"], part_bytes)
        for part in old:
            h = hashlib.sha256()
            with (bundle / part["file"]).open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
                    writer.write(chunk)
            if h.hexdigest() != part["sha256"]:
                raise ToolError(f"--resplit {bundle}: part {part['file']} does not match its sha256")
        parts = writer.close()
        for part in old:
            (bundle / part["file"]).unlink()
        for part in parts:
            (stage / part["file"]).replace(bundle / part["file"])
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    manifest["parts"] = parts
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    (bundle / "install.sh").write_text(render_install_sh(manifest))
    (bundle / "install.sh").chmod(0o755)
    return manifest


def _resplit_main(argv: list[str]) -> dict:
    """scripts/offline-bundle.py --resplit DIR --part-mib N"""
    ap = argparse.ArgumentParser(prog=f"{PROG} --resplit")
    ap.add_argument("--resplit", required=True, metavar="DIR", help="a bundle directory (OUT/NAME)")
    ap.add_argument("--part-mib", type=float, required=True, help="largest part, MiB")
    args = ap.parse_args(argv)
    if not (args.part_mib > 0):
        raise UsageError(f"--part-mib {args.part_mib}: must be positive")
    return resplit(Path(args.resplit), int(args.part_mib * MIB))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["--resplit"]:
            m = _resplit_main(argv)
            print(f"{m['bundle']}: {len(m['parts'])} part(s): " + ", ".join(
                f"{p['file']} {p['size'] / MIB:.1f} MiB" for p in m["parts"]))
            return 0
        args = parse_args(argv)
        manifest = build(args)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except ToolError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    print(summary(manifest))
    print(f"install on the node: sh {Path(args.out) / args.name / 'install.sh'} TARGET_DIR")
    return 0


if __name__ == "__main__":
    sys.exit(main())
