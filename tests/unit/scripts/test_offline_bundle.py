"""scripts/offline-bundle.py: a real (tiny) bundle for another Python and platform, installed with
its own install.sh; the resolver's constraint fallback and the closure's markers as pure logic.

The bundle test needs PyPI (CI reaches it): two small pure-python packages for Python 3.12 on
manylinux, built on this machine's 3.11. Pure-python wheels also import under 3.11, so the
generated install.sh's import checks run here with this machine's python3.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "offline-bundle.py"


def _load_module():
    spec = importlib.util.spec_from_file_location("offline_bundle", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["offline_bundle"] = mod  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


ob = _load_module()


def run_script(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=timeout)


PRUNE = """\
distributions:
  - name: wcwidth
    reason: tabulate imports it only if present (wide-character support is optional)
files:
  - glob: dateutil/zoneinfo/*.tar.gz
    reason: dateutil's own zoneinfo tarball; the node uses the system tz database
"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """One real bundle: tabulate[widechars] and python-dateutil for cp312 / manylinux_2_39, with
    six (dateutil's dependency) present on the 'node' in a local build, wcwidth (tabulate's
    widechars extra) pruned as a distribution, and a data file pruned by glob."""
    tmp = tmp_path_factory.mktemp("bundle")
    (tmp / "node-freeze.txt").write_text("six==1.17.0+node\npip==24.0\n")
    (tmp / "prune.yaml").write_text(PRUNE)
    proc = run_script(
        "--name", "tiny", "--out", str(tmp / "out"), "--python-version", "3.12",
        "--platform", "manylinux_2_39_x86_64", "--platform", "manylinux2014_x86_64",
        "--have", str(tmp / "node-freeze.txt"), "--prune", str(tmp / "prune.yaml"),
        "--part-mib", "0.05", "--import-check", "tabulate", "--import-check", "dateutil.tz",
        "tabulate[widechars]==0.9.0", "python-dateutil==2.9.0.post0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp, tmp / "out" / "tiny"


def test_bundle_manifest(bundle):
    _, out = bundle
    m = json.loads((out / "manifest.json").read_text())
    status = {p["name"].lower(): p["status"] for p in m["packages"]}
    assert status == {"tabulate": "bundled", "python-dateutil": "bundled", "six": "present",
                      "wcwidth": "pruned"}
    assert m["target"]["python_version"] == "3.12"
    assert m["prune"]["distributions"] == [{"name": "wcwidth", "pulled": True, "reason": m["prune"]["distributions"][0]["reason"]}]
    assert m["prune"]["files"][0]["paths"] == 1 and m["prune"]["files"][0]["bytes"] > 100_000
    assert len(m["parts"]) >= 2
    limit = int(0.05 * 1024 * 1024)
    for p in m["parts"]:
        f = out / p["file"]
        assert f.stat().st_size == p["size"] <= limit
    assert sum(p["size"] for p in m["parts"]) == m["sizes"]["xz_bytes"]
    assert sorted(f.name for f in out.iterdir()) == sorted(["manifest.json", "install.sh"] + [p["file"] for p in m["parts"]])


def test_install_sh_unpacks_and_imports(bundle):
    tmp, out = bundle
    target = tmp / "node" / "site"
    decoy = tmp / "cwd"  # a module of the same name in the current directory must not pass the check
    decoy.mkdir()
    (decoy / "tabulate.py").write_text("")
    proc = subprocess.run(["sh", str(out / "install.sh"), str(target)], capture_output=True, text=True,
                          timeout=120, cwd=decoy)
    assert proc.returncode == 0, proc.stderr
    assert f"import tabulate: ok ({target.resolve()}/tabulate/__init__.py)" in proc.stdout, proc.stdout
    assert "import dateutil.tz: ok" in proc.stdout
    # the modules come from the tree, before anything else on this machine
    code = "import tabulate, dateutil; print(tabulate.__file__); print(dateutil.__file__)"
    env = {**os.environ, "PYTHONPATH": str(target)}
    got = subprocess.run(["python3", "-c", code], capture_output=True, text=True, env=env, check=True)
    for line in got.stdout.split():
        assert Path(line).resolve().is_relative_to(target.resolve()), line
    assert (target / "dateutil" / "zoneinfo" / "__init__.py").is_file()
    assert not list((target / "dateutil" / "zoneinfo").glob("*.tar.gz"))  # pruned by glob
    assert not (target / "six.py").exists() and not list(target.glob("six-*.dist-info"))  # present on the node
    assert not (target / "wcwidth").exists()  # pruned distribution
    assert not list(target.rglob("*.pyc"))  # --no-compile


def test_install_sh_refuses_a_corrupt_part(bundle, tmp_path):
    _, out = bundle
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    part = sorted(copy.glob("*.part*"))[1]
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    proc = subprocess.run(["sh", str(copy / "install.sh"), str(tmp_path / "t")], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "sha256 mismatch" in proc.stderr and part.name in proc.stderr
    assert not (tmp_path / "t").exists()  # nothing unpacked


def test_install_sh_missing_part_and_usage(bundle, tmp_path):
    _, out = bundle
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    sorted(copy.glob("*.part*"))[-1].unlink()
    proc = subprocess.run(["sh", str(copy / "install.sh"), str(tmp_path / "t")], capture_output=True, text=True)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1 and "missing part" in proc.stderr
    proc = subprocess.run(["sh", str(copy / "install.sh")], capture_output=True, text=True)
    assert proc.returncode != 0 and "usage: sh install.sh TARGET_DIR" in proc.stderr


# ---------------------------------------------------------------- bad input: exit 2, one line


def _one_line_exit_2(proc, needle):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr, proc.stderr


def test_prune_entry_without_reason_is_exit_2(tmp_path):
    (tmp_path / "p.yaml").write_text("distributions:\n  - name: wcwidth\nfiles: []\n")
    proc = run_script("--name", "x", "--out", str(tmp_path), "--prune", str(tmp_path / "p.yaml"), "six")
    _one_line_exit_2(proc, "distributions[0] (wcwidth): missing reason")
    (tmp_path / "p.yaml").write_text("files:\n  - glob: a/*.so\n    reason: ''\n")
    _one_line_exit_2(run_script("--name", "x", "--out", str(tmp_path), "--prune", str(tmp_path / "p.yaml"), "six"),
                     "files[0] (a/*.so): missing reason")


@pytest.mark.parametrize("args, needle", [
    (["--have", "/nonexistent/freeze.txt", "six"], "--have /nonexistent/freeze.txt: no such file"),
    (["--platform", "win_amd64", "six"], "--platform 'win_amd64'"),
    (["--python-version", "twelve", "six"], "--python-version 'twelve'"),
    (["--part-mib", "0", "six"], "--part-mib 0"),
    (["--prune", "/nonexistent/p.yaml", "six"], "--prune /nonexistent/p.yaml: no such file"),
    ([], "no requirements given"),
    (["not a valid spec!"], "requirement 'not a valid spec!'"),
])
def test_bad_input_is_exit_2(tmp_path, args, needle):
    _one_line_exit_2(run_script("--name", "x", "--out", str(tmp_path), *args), needle)


# ---------------------------------------------------------------- pure logic


PIP_CONFLICT = """\
ERROR: Cannot install vllm==0.20.2 because these package versions have conflicting dependencies.

The conflict is caused by:
    vllm 0.20.2 depends on numba==0.65.0
    The user requested (constraint) numba==0.68.0

Additionally, some packages in these conflicts have no matching distributions available for your environment:
    numba
"""


def test_conflicting_constraints_parses_pip():
    assert ob.conflicting_constraints(PIP_CONFLICT, {"numba", "torch"}) == ["numba"]
    # a failure that is not about a node constraint gives nothing to drop
    assert ob.conflicting_constraints(PIP_CONFLICT, {"torch"}) == []
    assert ob.conflicting_constraints("ERROR: No matching distribution found for Foo_Bar==1", {"foo-bar"}) == ["foo-bar"]


def test_resolve_with_fallback_drops_only_conflicting_constraints():
    have = ob.parse_freeze("numba==0.68.0\nllvmlite==0.50.0\ntorch==2.11.0+cu130\n", "node-freeze.txt")
    assert have["torch"].version == "2.11.0" and have["torch"].raw == "2.11.0+cu130"
    calls = []

    def fake(constraints, only=None):  # numba first, then (with numba free) llvmlite conflicts
        calls.append(dict(constraints))
        if "numba" in constraints:
            return False, PIP_CONFLICT
        if "llvmlite" in constraints:
            return False, PIP_CONFLICT.replace("numba", "llvmlite")
        return True, {"install": []}

    report, dropped = ob.resolve_with_fallback(fake, have)
    assert report == {"install": []}
    assert calls[0] == {"numba": "0.68.0", "llvmlite": "0.50.0", "torch": "2.11.0"}
    assert calls[-1] == {"torch": "2.11.0"}
    assert dropped["numba"] == "bundled: node-freeze.txt has numba==0.68.0, requirements need other"
    assert set(dropped) == {"numba", "llvmlite"}

    with pytest.raises(ob.ToolError, match="resolving failed"):
        ob.resolve_with_fallback(lambda c, only=None: (False, "ERROR: No matching distribution found for nosuchpkg"), have)


def test_resolve_with_fallback_probes_when_pip_names_no_constraint():
    """Backtracking over many requirements can end on a message that blames no node package;
    each top-level requirement alone then shows which constraint it conflicts with."""
    have = ob.parse_freeze("aiohttp==3.14.3\nclick==8.5.0\n", "node-freeze.txt")
    probes = []

    def fake(constraints, only=None):
        if only:
            probes.append(only[0])
            if only == ["ray[default]<2.61,>=2.60"] and "aiohttp" in constraints:
                return False, "The user requested (constraint) aiohttp==3.14.3"
            return True, {"install": []}
        if "aiohttp" in constraints:
            return False, "ERROR: Cannot install farm==0.1.0, mlflow[auth]==3.17.1 and mlflow[auth]==3.17.2"
        return True, {"install": []}

    _, dropped = ob.resolve_with_fallback(fake, have, probes=["mlflow[auth]<4,>=3.17", "ray[default]<2.61,>=2.60"])
    assert set(dropped) == {"aiohttp"} and probes == ["mlflow[auth]<4,>=3.17", "ray[default]<2.61,>=2.60"]


def _item(name, version, requires=(), requested=False, extras=()):
    return {"metadata": {"name": name, "version": version, "requires_dist": list(requires)},
            "requested": requested, "requested_extras": list(extras), "download_info": {"url": f"https://x/{name}.whl"}}


def test_closure_uses_the_targets_markers_and_skips_pruned():
    items = {ob.canonicalize_name(i["metadata"]["name"]): i for i in [
        _item("app", "1", ['old-backport; python_version < "3.12"', 'new-thing; python_version >= "3.12"',
                           "heavy-kernels", 'optional-x; extra == "x"', "Shared_Lib>=1"], requested=True, extras=["x"]),
        _item("old-backport", "1"),
        _item("heavy-kernels", "1", ["only-for-heavy"]),
        _item("only-for-heavy", "1"),
        _item("optional-x", "1", ["shared-lib"]),
        _item("shared-lib", "2"),
    ]}
    env = ob.Target("3.12", ["manylinux_2_39_x86_64"]).marker_env()
    assert env["python_version"] == "3.12" and env["platform_machine"] == "x86_64"
    cl = ob.closure(items, {"app": {"x"}}, env, {"heavy-kernels"})
    assert cl.needed == {"app", "optional-x", "shared-lib"}
    assert cl.missing == ["new-thing"]  # pip (on 3.11 here) never saw it: resolve it again
    assert cl.edges["shared-lib"] == [("app 1", ">=1"), ("optional-x 1", "")]

    have = {"shared-lib": ob.Have("2", "node-freeze.txt", "2+cu130")}
    prune = ob.parse_prune({"distributions": [{"name": "heavy-kernels", "reason": "not on sm90"}]}, "p.yaml")
    pkgs = {p.name: p for p in ob.plan_packages(items, cl, have, {}, prune)}
    assert pkgs["shared-lib"].status == "present"
    assert pkgs["heavy-kernels"].status == "pruned" and pkgs["heavy-kernels"].reason == "not on sm90"
    assert pkgs["only-for-heavy"].status == "unused" and pkgs["old-backport"].status == "unused"
    assert pkgs["app"].status == pkgs["optional-x"].status == "bundled"


def test_node_version_kept_when_it_fits_or_is_declared():
    """pip picked other versions (a dropped constraint forced them); the node's still serve where
    every requirement on them allows it, or where the prune list keeps them on purpose."""
    items = {ob.canonicalize_name(i["metadata"]["name"]): i for i in [
        _item("engine", "1", ["numba==0.65.0", "numpy", "pinned-lib<2"], requested=True),
        _item("numba", "0.65.0", ["llvmlite<0.48", "numpy<2.5"]),
        _item("llvmlite", "0.47.0"),
        _item("numpy", "2.3.5"),
        _item("pinned-lib", "1.5"),
    ]}
    have = ob.parse_freeze("numba==0.68.0\nllvmlite==0.50.0\nnumpy==2.5.2\npinned-lib==2.1\n", "node-freeze.txt")
    env = ob.Target("3.12", ["manylinux_2_39_x86_64"]).marker_env()
    prune = ob.parse_prune({"keep_node": [{"name": "numba", "reason": "measured to work"}]}, "p.yaml")
    cl = ob.closure(items, {"engine": set()}, env, set(), {"numba"})
    dropped = {n: f"bundled: node has {n}" for n in ("numba", "llvmlite", "numpy", "pinned-lib")}
    pkgs = {p.name: p for p in ob.plan_packages(items, cl, have, dropped, prune)}
    assert pkgs["numba"].status == "present" and pkgs["numba"].version == "0.68.0"
    assert "kept over engine 1 requires numba==0.65.0: measured to work" in pkgs["numba"].reason
    assert pkgs["llvmlite"].status == "unused"  # only the replaced numba wanted 0.47
    assert pkgs["numpy"].status == "present" and pkgs["numpy"].version == "2.5.2"
    assert pkgs["pinned-lib"].status == "bundled" and "engine 1 requires pinned-lib<2" in pkgs["pinned-lib"].reason
    assert prune.keep_node[0].used and prune.keep_node[0].overrides == ["engine 1 requires numba==0.65.0"]

    with pytest.raises(ob.UsageError, match="keep_node numba: the node does not have it"):
        ob.plan_packages(items, cl, {}, {}, prune)


def test_manifest_as_have():
    data = {"bundle": "engine-vllm", "packages": [
        {"name": "pydantic", "version": "2.13.1", "status": "bundled"},
        {"name": "torch", "version": "2.11.0", "status": "present"},
        {"name": "flashinfer-python", "version": "0.6", "status": "pruned"}]}
    have = ob.parse_manifest_have(data, "manifest.json")
    assert set(have) == {"pydantic", "torch"} and have["pydantic"].source == "bundle engine-vllm"


def test_part_writer_splits_and_hashes(tmp_path):
    w = ob.PartWriter(tmp_path, "b", 10)
    for chunk in (b"0123456", b"789abcdefghij", b"k"):
        w.write(chunk)
    parts = w.close()
    assert [p["size"] for p in parts] == [10, 10, 1]
    assert b"".join((tmp_path / p["file"]).read_bytes() for p in parts) == b"0123456789abcdefghijk"
    import hashlib
    assert parts[0]["sha256"] == hashlib.sha256(b"0123456789").hexdigest()


# ---------------------------------------------------------------- cuda_arches


def _fake_cuda_library(path: Path, entries: list[tuple[int, int, bytes]]) -> None:
    """A minimal ELF64 with one .nv_fatbin section holding one fatbin container of `entries`
    (kind, sm, payload), in nvcc's layout as read from sglang-kernel 0.4.5's flash_ops.abi3.so."""
    import struct

    body = b""
    for kind, sm, payload in entries:
        header = bytearray(64)
        struct.pack_into("<HHIQ", header, 0, kind, 0x0101, 64, len(payload))
        struct.pack_into("<I", header, 28, sm)
        body += bytes(header) + payload
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body
    shstrtab = b"\0.nv_fatbin\0.shstrtab\0"
    fat_off = 64
    str_off = fat_off + len(fatbin)
    shoff = (str_off + len(shstrtab) + 7) // 8 * 8
    elf = bytearray(shoff + 3 * 64)
    elf[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", elf, 0x28, shoff)
    struct.pack_into("<HHH", elf, 0x3A, 64, 3, 2)
    elf[fat_off:fat_off + len(fatbin)] = fatbin
    elf[str_off:str_off + len(shstrtab)] = shstrtab
    struct.pack_into("<IIQQQQ", elf, shoff + 64, 1, 1, 0, 0, fat_off, len(fatbin))
    struct.pack_into("<IIQQQQ", elf, shoff + 128, 12, 3, 0, 0, str_off, len(shstrtab))
    path.write_bytes(bytes(elf))


def test_cuda_arches_zeroes_other_cubins_and_keeps_ptx(tmp_path):
    lib = tmp_path / "tree" / "pkg" / "ops.so"
    lib.parent.mkdir(parents=True)
    cubin = b"\x7fELF" + b"x" * 60
    _fake_cuda_library(lib, [(2, 90, cubin), (2, 80, cubin), (2, 86, cubin), (1, 80, b"ptx" * 8)])
    size = lib.stat().st_size
    prune = ob.parse_prune({"cuda_arches": [{"glob": "pkg/*.so", "keep_sm": [90], "reason": "an sm90 node"}]}, "p.yaml")
    ob.apply_cuda_arches(tmp_path / "tree", prune)
    data = lib.read_bytes()
    got = {(kind, sm): data[off:off + n] for kind, sm, off, n in ob.fatbin_entries(data)}
    assert got[(2, 90)] == cubin and got[(1, 80)] == b"ptx" * 8      # kept: the sm90 cubin and all PTX
    assert got[(2, 80)] == bytes(64) and got[(2, 86)] == bytes(64)    # emptied in place
    assert lib.stat().st_size == size
    a = prune.cuda_arches[0]
    assert (a.files, a.entries_emptied, a.bytes) == (1, 2, 128)


def test_cuda_arches_refuses_to_empty_every_cubin(tmp_path):
    lib = tmp_path / "ops.so"
    _fake_cuda_library(lib, [(2, 80, b"\x7fELF" * 4), (2, 86, b"\x7fELF" * 4)])
    with pytest.raises(ob.UsageError, match=r"no cubin for sm \[90\] \(it has sm \[80, 86\]\)"):
        ob.empty_other_arches(lib, [90])
    (tmp_path / "plain.so").write_bytes(b"not an elf")
    with pytest.raises(ob.UsageError, match="not a little-endian ELF64"):
        ob.empty_other_arches(tmp_path / "plain.so", [90])


@pytest.mark.parametrize("entry, needle", [
    ({"glob": "a.so", "reason": "r"}, "keep_sm must be a non-empty list"),
    ({"glob": "a.so", "keep_sm": ["90"], "reason": "r"}, "keep_sm must be a non-empty list"),
    ({"glob": "a.so", "keep_sm": [90]}, "missing reason"),
    ({"glob": "../a.so", "keep_sm": [90], "reason": "r"}, "relative to the tree"),
])
def test_cuda_arches_entries_are_checked(entry, needle):
    with pytest.raises(ob.UsageError, match=needle):
        ob.parse_prune({"cuda_arches": [entry]}, "p.yaml")


def test_the_sglang_prune_list_parses():
    prune = ob.load_prune(str(SCRIPT.parent / "bundles" / "sglang-h200.prune.yaml"))
    assert [a.keep_sm for a in prune.cuda_arches] == [[90]]
    assert {"nvidia-cutlass-dsl", "flash-attn-4", "tilelang", "torchao", "kernels"} <= prune.dist_names()


def test_a_built_bundle_cut_again_installs_the_same_tree(bundle, tmp_path):
    tmp, out = bundle
    copy = tmp_path / "tiny"
    shutil.copytree(out, copy)
    before = json.loads((copy / "manifest.json").read_text())
    whole = b"".join((copy / p["file"]).read_bytes() for p in before["parts"])
    proc = run_script("--resplit", str(copy), "--part-mib", "0.02")
    assert proc.returncode == 0, proc.stderr
    after = json.loads((copy / "manifest.json").read_text())
    limit = int(0.02 * 1024 * 1024)
    assert len(after["parts"]) > len(before["parts"]) and all(p["size"] <= limit for p in after["parts"])
    # the same archive, byte for byte, in the new parts; only the new parts are left beside the manifest
    assert b"".join((copy / p["file"]).read_bytes() for p in after["parts"]) == whole
    assert sorted(f.name for f in copy.iterdir()) == sorted(["manifest.json", "install.sh"] + [p["file"] for p in after["parts"]])
    assert {k: v for k, v in after.items() if k != "parts"} == {k: v for k, v in before.items() if k != "parts"}
    target = tmp_path / "site"
    got = subprocess.run(["sh", str(copy / "install.sh"), str(target)], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    assert f"({len(after['parts'])} part(s))" in got.stdout and (target / "tabulate" / "__init__.py").is_file()


def test_resplit_of_a_damaged_bundle_changes_nothing(bundle, tmp_path):
    tmp, out = bundle
    copy = tmp_path / "tiny"
    shutil.copytree(out, copy)
    first = json.loads((copy / "manifest.json").read_text())["parts"][0]["file"]
    data = bytearray((copy / first).read_bytes())
    data[10] ^= 0xFF
    (copy / first).write_bytes(bytes(data))
    listing = sorted(f.name for f in copy.iterdir())
    proc = run_script("--resplit", str(copy), "--part-mib", "0.02")
    assert proc.returncode == 1 and f"part {first} does not match its sha256" in proc.stderr
    assert sorted(f.name for f in copy.iterdir()) == listing
    assert run_script("--resplit", str(tmp_path), "--part-mib", "1").returncode == 2
