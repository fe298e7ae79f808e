"""A compile cache packed on one node unpacks on another; a damaged one is refused, never used."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from actors import compile_cache as cc
from farm.engines import get_engine
from farm.study.trial import Trial


def _group(tmp_path, name="g"):
    d = tmp_path / name
    (d / "vllm" / "torch_compile_cache" / "abc").mkdir(parents=True)
    (d / "vllm" / "torch_compile_cache" / "abc" / "graph.py").write_text("compiled = True\n")
    (d / "vllm" / "kernel.so").write_bytes(os.urandom(4096))
    return d


def test_a_pack_unpacks_to_the_same_files_elsewhere(tmp_path):
    meta, blob = cc.pack(_group(tmp_path), "k1", "vllm", "NVIDIA H200")
    assert meta.files == 2 and meta.bytes == len(blob)
    other = tmp_path / "node-2" / "k1"
    assert cc.unpack(meta, blob, other) == 2
    assert (other / "vllm/torch_compile_cache/abc/graph.py").read_text() == "compiled = True\n"
    assert (other / "vllm/kernel.so").read_bytes() == (tmp_path / "g/vllm/kernel.so").read_bytes()


def test_a_damaged_pack_is_refused(tmp_path):
    meta, blob = cc.pack(_group(tmp_path), "k1", "vllm", None)
    with pytest.raises(cc.CacheError, match="checksum"):
        cc.unpack(meta, blob[:-10] + b"0123456789", tmp_path / "x")
    bogus = b"not a tar at all"
    with pytest.raises(cc.CacheError, match="does not unpack"):
        cc.unpack(meta.model_copy(update={"sha256": __import__("hashlib").sha256(bogus).hexdigest()}), bogus, tmp_path / "y")
    assert not any((tmp_path / "y").rglob("*.so"))


def test_a_pack_cannot_write_outside_its_group(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"x"
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    blob = buf.getvalue()
    meta = cc.PackMeta(key="k", sha256=__import__("hashlib").sha256(blob).hexdigest(), bytes=len(blob), files=1,
                       engine="vllm", created_at=0)
    with pytest.raises(cc.CacheError):
        cc.unpack(meta, blob, tmp_path / "a" / "b")
    assert not (tmp_path / "escaped.txt").exists()


def test_a_directory_store_keeps_packs_across_sweeps_and_evicts_the_oldest(tmp_path):
    store = cc.DirStore(tmp_path / "shared", max_bytes=10_000)
    first = cc.pack(_group(tmp_path, "a"), "a", "vllm", None)
    store.put(*first)
    got = store.get("a")
    assert got is not None and got[0].sha256 == first[0].sha256 and got[1] == first[1]
    os.utime(tmp_path / "shared" / "a.tgz", (1, 1))  # the oldest
    store.put(*cc.pack(_group(tmp_path, "b"), "b", "vllm", None))
    store.put(*cc.pack(_group(tmp_path, "c"), "c", "vllm", None))
    assert store.get("a") is None and store.get("c") is not None  # over 10 kB: the oldest went
    assert store.get("never") is None


def test_the_group_is_what_changes_compiled_code_on_this_gpu():
    vllm = get_engine("vllm")

    def trial(model, engine="vllm", **flags):
        return Trial(id="x", engine=engine, model_key="m", model=model, flags=flags, profiles=["p"], gpus=1)

    a = cc.group_key(vllm, trial("/tmp/a/qwen", quantization="fp8", **{"max-num-seqs": 8}), "NVIDIA H200")
    assert a == cc.group_key(vllm, trial("/tmp/a/qwen", quantization="fp8", **{"max-num-seqs": 256}), "NVIDIA H200")
    assert a != cc.group_key(vllm, trial("/tmp/a/qwen", quantization="fp8"), "NVIDIA H100")
    assert a != cc.group_key(vllm, trial("/tmp/a/qwen"), "NVIDIA H200")
    # vLLM's compiled graphs are keyed by the model's path: on the H200 the same flags from two paths
    # compiled into two cache directories, and a pack pulled across them started cold
    # (tests/fixtures/engine-logs: the two starts' "cache directory" lines)
    assert a != cc.group_key(vllm, trial("/home/u/models/qwen", quantization="fp8"), "NVIDIA H200")
    # an engine whose compiled code does not depend on it keys the model by name
    mock = get_engine("mock")
    flags = {"start-s": 1, "graph": "g"}
    assert cc.group_key(mock, trial("/tmp/a/tiny", "mock", **flags), None) == \
        cc.group_key(mock, trial("/home/u/tiny", "mock", **flags), None)


def test_an_sglang_pack_without_inductors_cache_is_not_pulled_for_warm():
    """The FP8-KV group's pack of 2026-12-03 (key 13768ce5..., carried to a fresh H200 on 2026-12-04)
    held SGLang's four cache folders but not inductor's, and started 140 s against 100 s warm on the
    node that compiled it. Inductor's cache is now the group's too, under a new key: that pack is not
    pulled as warm again, and the next cold start publishes a whole one."""
    from pathlib import Path

    from farm.study.grid import expand
    from farm.study.load import load_study

    repo = Path(__file__).resolve().parents[3]
    trial = next(t for t in expand(load_study(repo / "configs" / "h200-dummy.yaml"), "sglang")
                 if t.name == "sglang_fp8_kv_cache_fp8")
    sglang = get_engine("sglang")
    env = sglang.cache_env(Path("/cache/g"))
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith("/cache/g/")
    key = cc.group_key(sglang, trial, "NVIDIA H200")
    # the same group under the layout before: the key the carried pack was published under
    before = type("Before", (type(sglang),), {"compile_cache_layout": None})()
    assert cc.group_key(before, trial, "NVIDIA H200") == "13768ce5ff980ca2c7f77c68"
    assert key != "13768ce5ff980ca2c7f77c68"
    # vLLM's layout did not change: the step3/step4 packs of 2026-12-03 keep their keys
    assert get_engine("vllm").compile_cache_layout is None
