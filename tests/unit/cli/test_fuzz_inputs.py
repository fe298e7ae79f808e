"""Property: whatever a user hands farm, it ends in exit 0, or in exit 2 with a few lines and no
traceback, and nothing is written and no Ray is started.

Generated and mutated inputs, through the real command group in this process (click's
CliRunner: about 0.2 s a case, where a process costs 3 s; tests/unit/cli/test_bad_input.py runs the
named regressions as real processes):
- study files: the real configs/smoke.yaml as the include of a small top file, its parsed
  structure mutated (values of every type and size replaced, keys deleted and added), its text
  and bytes mutated, random bytes, and other encodings (UTF-16/32, Latin-1, cp1252, Shift JIS);
  run as `farm sweep --dry-run`, which reads and checks everything but starts nothing;
- results files: the seed's real results file, mutated the same ways (NaN/Infinity, huge
  numbers, deep nesting), run as `farm analyze --results`;
- command-line options: URIs, addresses, ids, counts and names built from the forms users mix
  up, and arbitrary text, for `farm sweep --dry-run`, `farm status` and `farm report`;
- studies generated from the schema itself: every key of every model the study's schema declares
  (a test fails when a model is added without a place here), and every flag an engine types, set
  to values of its own annotation or awkward ones; these and the results files with extreme floats
  (denormals, the float limit, fractions just past 1) must end in exactly one line on exit 2.

Derandomized (the same examples on every run, so CI is stable), no example database. A failure
found here is recorded as an explicit case in tests/unit/cli/test_bad_input.py (FOUND_BY_FUZZING).
The example counts keep the whole file near a minute and a half of CPU time (about three minutes on
two shared cores).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from farm.cli.main import cli

REPO = Path(__file__).resolve().parents[3]
SMOKE_TEXT = (REPO / "configs" / "smoke.yaml").read_text()
SMOKE = yaml.safe_load(SMOKE_TEXT)
TOP = {"name": "fuzz", "primary_profile": "smoke_chat", "include": "smoke.yaml"}
SEED_TEXT = (REPO / "tests" / "fixtures" / "seed-results.json").read_text()
SEED = json.loads(SEED_TEXT)

FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def fuzz(examples: int) -> settings:
    return settings(FUZZ, max_examples=examples)
RUNNER = CliRunner()
MAX_ERROR_LINES = 4  # one line of farm's; click's own usage errors take up to four


@pytest.fixture(autouse=True, scope="module")
def _clean_env():
    with pytest.MonkeyPatch.context() as mp:
        for name in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS", "FARM_CACHE_DIR"):
            mp.delenv(name, raising=False)
        yield


def _run(args: list[str], files: dict[str, bytes], one_line: bool = False) -> None:
    """`farm ARGS` in a fresh directory holding `files`; asserts the property. `one_line`: the
    arguments are well-formed, so an exit 2 is farm's own one line (click's usage errors, which
    take up to four, cannot happen)."""
    with tempfile.TemporaryDirectory(prefix="farm-fuzz-") as tmp:
        for name, data in files.items():
            (Path(tmp) / name).write_bytes(data)
        before = sorted(os.listdir(tmp))
        old = os.getcwd()
        os.chdir(tmp)
        try:
            result = RUNNER.invoke(cli, args, catch_exceptions=True)
        finally:
            os.chdir(old)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            tb = "".join(traceback.format_exception(*result.exc_info))
            pytest.fail(f"farm {args} raised:\n{tb}\nfiles: {files!r}"[:6000])
        assert result.exit_code in (0, 2), (args, result.exit_code, result.output[-2000:])
        if result.exit_code == 2:
            lines = result.stderr.strip().splitlines()
            assert 1 <= len(lines) <= (1 if one_line else MAX_ERROR_LINES), (args, result.stderr[-2000:])
            assert "Traceback" not in result.output
        assert sorted(os.listdir(tmp)) == before, f"farm {args} wrote {set(os.listdir(tmp)) - set(before)}"
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized(), "Ray was started"


# -- values and mutations -----------------------------------------------------------------

AWKWARD = [0, -1, 1, 2**63, -(2**63) - 1, 10**30, 1e308, -1e-308, float("inf"), float("-inf"), float("nan"),
           "", " ", "\t", "../x", "./", "/dev/zero", "/", "~", "${HOME}", "$NOPE/x", "auto", "farm:tiny", "null",
           "true", "1e999", ".inf", "é", "日本", "💥", "a" * 300, "--", "-x", "=", "{}", "[]", "\u202e", "\x00",
           "\x1b[31m", "line\nbreak"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=-(2**80), max_value=2**80),
                    st.floats(), st.text(max_size=16), st.sampled_from(AWKWARD))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=10), inner, max_size=3), max_leaves=6)


@st.composite
def mutated(draw, base):
    """`base` with one to three changes at places drawn anywhere in its tree."""
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        parent, key, node = None, None, data
        while isinstance(node, (dict, list)) and node and draw(st.integers(0, 5)) > 0:
            key = draw(st.sampled_from(list(node) if isinstance(node, dict) else list(range(len(node)))))
            parent, node = node, node[key]
        action = draw(st.sampled_from(["replace", "replace", "delete", "add", "wrap"]))
        if action == "add" and isinstance(node, (dict, list)):
            if isinstance(node, dict):
                node[draw(st.text(max_size=12) | st.sampled_from(sorted(map(str, node)) or ["x"]))] = draw(values)
            else:
                node.append(draw(values))
        elif action == "delete" and parent is not None:
            del parent[key]
        else:
            new = draw(values) if action != "wrap" else draw(st.sampled_from([[node], {"x": node}]))
            if parent is None:
                data = new
            else:
                parent[key] = new
    return data


@st.composite
def text_edits(draw, text: str):
    """`text` with a few characters inserted, deleted or replaced."""
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        how = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.text(max_size=6) | st.sampled_from(["[", "]", "{", "}", ":", "- ", "&a ", "*a", "!!", "\t",
                                                             "'", '"', "#", "\n  ", "%", "@", "NaN", "1e999"]))
        end = min(len(text), at + draw(st.integers(0, 8)))
        text = text[:at] + (piece if how != "delete" else "") + text[(end if how != "insert" else at):]
    return text


@st.composite
def byte_edits(draw, data: bytes):
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


ENCODINGS = ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "cp1252", "shift_jis", "utf-8-sig"]


def _dump_yaml(data) -> bytes:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False).encode()


# -- study files --------------------------------------------------------------------------

SWEEP_DRY = ["sweep", "--config", "study.yaml", "--grid", "smoke", "--dry-run"]


@st.composite
def study_files(draw):
    top, include = _dump_yaml(TOP), SMOKE_TEXT.encode()
    kind = draw(st.sampled_from(["structure", "structure", "structure", "text", "bytes", "random", "encoding"]))
    target = draw(st.sampled_from(["top", "include", "include"]))
    if kind == "structure":
        if target == "top":
            top = _dump_yaml(draw(mutated(TOP)))
        else:
            include = _dump_yaml(draw(mutated(SMOKE)))
    else:
        original = (top if target == "top" else include)
        if kind == "text":
            new = draw(text_edits(original.decode())).encode("utf-8", "surrogatepass")
        elif kind == "bytes":
            new = draw(byte_edits(original))
        elif kind == "random":
            new = draw(st.binary(max_size=400))
        else:
            new = original.decode().replace("fuzz", "fuzz-é-ü").replace("laptop", "läptöp").encode(
                draw(st.sampled_from(ENCODINGS)), "replace")
        top, include = (new, include) if target == "top" else (top, new)
    return {"study.yaml": top, "smoke.yaml": include}


def test_the_real_study_passes_unchanged():
    _run(SWEEP_DRY, {"study.yaml": _dump_yaml(TOP), "smoke.yaml": SMOKE_TEXT.encode()})


@fuzz(400)
@given(files=study_files())
def test_any_study_file_ends_in_exit_0_or_one_line_and_exit_2(files):
    _run(SWEEP_DRY, files)


# -- results files ------------------------------------------------------------------------


@st.composite
def results_files(draw):
    kind = draw(st.sampled_from(["structure", "structure", "structure", "text", "bytes", "random", "encoding", "deep"]))
    if kind == "structure":
        text = json.dumps(draw(mutated(SEED)), allow_nan=True)
    elif kind == "text":
        text = draw(text_edits(SEED_TEXT))
    elif kind == "deep":
        depth = draw(st.integers(20, 200_000))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        return {"results.json": (opener * depth + "1" + closer * depth).encode()}
    elif kind == "bytes":
        return {"results.json": draw(byte_edits(SEED_TEXT.encode()))}
    elif kind == "random":
        return {"results.json": draw(st.binary(max_size=400))}
    else:
        return {"results.json": SEED_TEXT.replace("baseline", "bäseline").encode(draw(st.sampled_from(ENCODINGS)), "replace")}
    return {"results.json": text.encode("utf-8", "surrogatepass")}


def test_the_real_results_file_passes_unchanged():
    _run(["analyze", "--results", "results.json"], {"results.json": SEED_TEXT.encode()})


@fuzz(200)
@given(files=results_files(), fmt=st.sampled_from(["text", "markdown", "json"]))
def test_any_results_file_ends_in_exit_0_or_one_line_and_exit_2(files, fmt):
    _run(["analyze", "--results", "results.json", "--format", fmt], files)


# -- command-line options -----------------------------------------------------------------

SCHEMES = ["", "http", "https", "HTTP", "sqlite", "file", "ray", "databricks", "postgresql", "s3", "foo", "tcp"]
SEPARATORS = ["://", ":", ":///", ":////", "//", ""]
LOOPBACK_HOSTS = ["127.0.0.1", "[::1]", "[::1", "::1", "", "localhost", "127.0.0.1.", "[127.0.0.1]"]
HOSTS = LOOPBACK_HOSTS + ["ex ample", "a_b", "héllo", "-h", "h" * 300, "user:pw@127.0.0.1", "%41"]
PORTS = ["", ":1", ":0", ":65536", ":-1", ":abc", ":" + "9" * 30, ":8265", ":", "::"]
# Ports where nothing listens, for the cases that reach the network (8265 could be a live Ray).
CLOSED_PORTS = ["", ":1", ":9", ":0", ":65536", ":-1", ":abc", ":" + "9" * 30, ":", "::"]
PATHS = ["", "/", "/x", "?a=b", "#f", "/mlflow.db", "/nowhere/mlflow.db", ":memory:", "/\x00", " "]


def uris(hosts, ports=PORTS):
    return st.builds(lambda *parts: "".join(parts), st.sampled_from(SCHEMES), st.sampled_from(SEPARATORS),
                     st.sampled_from(hosts), st.sampled_from(ports), st.sampled_from(PATHS))


option_text = st.one_of(st.text(max_size=40), st.sampled_from([str(v) for v in AWKWARD]), uris(HOSTS),
                        st.integers().map(str), st.floats().map(str), st.sampled_from(["auto", "AUTO", "3", "0", "-3",
                                                                                       "1e3", "inf", "nan", "٣", "²"]))
SWEEP_OPTIONS = ["--tracking-uri", "--address", "--resume", "--repeats", "--run-budget", "--experiment", "--workdir",
                 "--grid", "--config"]


@fuzz(300)
@given(option=st.sampled_from(SWEEP_OPTIONS), value=option_text)
def test_any_sweep_option_ends_in_exit_0_or_one_line_and_exit_2(option, value):
    args = ["sweep", "--grid", "smoke", "--dry-run", option, value]
    _run(args, {})


@fuzz(100)
@given(command=st.sampled_from(["status", "report"]), uri=uris(LOOPBACK_HOSTS) | option_text,
       sweep=st.one_of(st.text(max_size=40), st.sampled_from(["0" * 32, "abc", "a'b", "a b", "-x", ""])))
def test_reading_commands_with_any_store_and_id_end_in_exit_0_or_one_line_and_exit_2(command, uri, sweep):
    # Only loopback hosts reach the network here (a refused port answers at once); an accepted
    # URI with another host would wait for DNS, so it is checked by parsing alone, above.
    from farm import inputs

    try:
        accepted = inputs.tracking_uri(uri)
    except inputs.UserError:
        accepted = None
    if accepted and accepted.lower().startswith("http") and not any(h and h in accepted for h in LOOPBACK_HOSTS):
        uri = "sqlite:///nowhere/mlflow.db"
    args = [command, sweep, "--tracking-uri", uri] if command == "report" else [command, "--tracking-uri", uri]
    _run(args, {})


STUDY_TEXT = """\
name: fuzz
primary_profile: p
models: {tiny: {name: farm-tiny, tokenizer: "farm:tiny"}}
engines: {mock: {}}
profiles: {p: {data: {kind: synthetic, prompt_tokens: 8, output_tokens: 4}, requests: 4}}
grids: {g: {blocks: [{engine: mock, models: [tiny]}]}}
"""


def _stays_local(value: str, reader) -> bool:
    """Whether a value the boundary accepts points nowhere but a closed loopback port (never
    `auto`: that joins whatever Ray runs on this machine)."""
    from farm import inputs

    try:
        reader(value)
    except inputs.UserError:
        return True  # refused before any connection
    if value.strip().lower() == "auto":
        return False
    if value.startswith("sqlite:"):
        return True
    host, port = inputs.address_host_port(value)
    return host in ("127.0.0.1", "::1", "localhost") and port in (1, 9, 80, 443)


# Stores and addresses of the right form (closed loopback ports), so that the checks behind the
# form are reached: the SQLite file, the server probe, the Ray probe, the Jobs API client.
STORES = ["sqlite:///mlflow.db", "http://127.0.0.1:9", "https://[::1]:1/"]
ADDRESSES = [f"{scheme}{host}:{port}" for scheme in ("", "ray://", "http://", "https://")
             for host in ("127.0.0.1", "[::1]", "localhost") for port in (1, 9)]


@fuzz(150)
@given(well_formed=st.integers(0, 3), store=st.sampled_from(STORES), fuzzed_store=uris(LOOPBACK_HOSTS, CLOSED_PORTS)
       | option_text, address=st.none() | st.sampled_from(ADDRESSES) | uris(LOOPBACK_HOSTS, CLOSED_PORTS) | option_text)
def test_a_real_sweep_with_any_store_and_address_is_stopped_by_its_checks(well_formed, store, fuzzed_store, address):
    """Not a dry run: the checks that reach the outside world (the store, the Ray address) see
    every value the boundary lets through. `--resume` of a sweep that cannot exist ends the
    sweep that passes them all, before Ray starts."""
    from farm import inputs

    if not well_formed:  # one case in four fuzzes the store; the others let the address be reached
        store = fuzzed_store if _stays_local(fuzzed_store, inputs.tracking_uri) else STORES[0]
    uri = store
    args = ["sweep", "--config", "s.yaml", "--grid", "g", "--resume", "0123456789abcdef", "--tracking-uri", uri]
    if address is not None:
        args += ["--address", address if _stays_local(address, inputs.ray_address) else "127.0.0.1:9"]
    _run(args, {"s.yaml": STUDY_TEXT.encode()})


# -- studies generated from the schema itself ----------------------------------------------
#
# Not mutations of one real study: every key the study's pydantic models declare (and every flag
# an engine types, farm/engines/flag_types.py) gets values drawn from its own annotation (valid
# in type, often out of range or in conflict with the rest) or from AWKWARD (invalid), in a
# small study whose names refer to each other, so that the checks behind the types are reached.

import types as _types  # noqa: E402
import typing as _typing  # noqa: E402

from pydantic import BaseModel as _BaseModel  # noqa: E402

from farm.engines import ENGINES as _ENGINES  # noqa: E402
from farm.study.knobs import KNOBS as _KNOBS  # noqa: E402
from farm.study import grid_spec as _grid_spec, sections as _sections, spec as _spec  # noqa: E402
from farm.study.spec import Study as _Study  # noqa: E402

SCHEMA_BASE = {
    "name": "fuzz", "primary_profile": "p",
    "models": {"tiny": {"name": "farm-tiny", "tokenizer": "farm:tiny"}},
    "engines": {"mock": {"flags": {"ttft-ms": 5}}, "vllm": {}, "sglang": {}},
    "profiles": {"p": {"data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 4}, "requests": 4}},
    "grids": {"g": {"blocks": [{"engine": "mock", "models": ["tiny"], "axes": {"itl-ms": [1, 2]}}]}},
}
# Names the study's keys refer to each other by, and the flags and knobs farm knows.
FLAG_NAMES = sorted({name for engine in _ENGINES.values() for name in engine.flag_types}) + ["itl-ms", "x"]
NAMES = ["tiny", "p", "g", "mock", "vllm", "sglang", "farm-tiny", "farm:tiny", "auto", "ray", "H200", "fp8", "a"]
name_text = st.sampled_from(NAMES) | st.text(max_size=8)
flag_keys = st.sampled_from(FLAG_NAMES) | st.sampled_from([f.replace("-", "_") for f in FLAG_NAMES]) | \
    st.sampled_from(["--x=1", "x=1", "a b", "--max-num-seqs", ""])
numbers = st.sampled_from([0, 1, 2, -1, 0.5, 1.5, 90, 2**40, 1e-310, 5e-324, 1e308]) | st.integers(-3, 100) | \
    st.floats(allow_nan=False, allow_infinity=False)


def _from_annotation(annotation, field: str = ""):
    """Values of one annotation (the schema's own types), with names the study knows."""
    origin, args = _typing.get_origin(annotation), _typing.get_args(annotation)
    if annotation is type(None):
        return st.none()
    if isinstance(annotation, type) and issubclass(annotation, _BaseModel):
        return _model_values(annotation)
    if origin is _typing.Literal:
        return st.sampled_from(args)
    if origin in (_typing.Union, _types.UnionType):
        return st.one_of([_from_annotation(a, field) for a in args])
    if origin is list:
        return st.lists(_from_annotation(args[0] if args else _typing.Any, field), max_size=3)
    if origin is dict:
        keys = {"flags": flag_keys, "axes": flag_keys, "exclude": flag_keys, "knobs": st.sampled_from(list(_KNOBS)),
                "knob_axes": st.sampled_from(list(_KNOBS))}.get(field, name_text)
        return st.dictionaries(keys, _from_annotation(args[1] if args else _typing.Any, field), max_size=3)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return numbers.filter(lambda v: isinstance(v, int))
    if annotation is float:
        return numbers
    if annotation is str:
        return name_text
    return scalars  # Any, dict, list: whatever a YAML value can be


def _model_values(model: type[_BaseModel]):
    """A mapping of `model`'s keys: each required one, some of the optional ones."""
    fields = model.model_fields

    @st.composite
    def build(draw):
        out = {}
        for name, info in fields.items():
            if info.is_required() or draw(st.integers(0, 3)) == 0:
                out[name] = draw(_from_annotation(info.annotation, name))
        return out
    return st.deferred(build)


# Where each model of the schema sits in SCHEMA_BASE (a path of keys), so a field of it can be set.
SCHEMA_PLACES = [((), _Study), (("models", "tiny"), _sections.ModelSpec), (("engines", "mock"), _sections.EngineSpec),
                 (("engines", "vllm"), _sections.EngineSpec), (("profiles", "p"), _sections.ProfileSpec),
                 (("profiles", "p", "data"), _sections.DataSpec), (("profiles", "p", "slo"), _sections.SLOSpec),
                 (("profiles", "p", "capacity"), _sections.CapacitySpec), (("grids", "g"), _grid_spec.GridSpec),
                 (("grids", "g", "blocks", 0), _grid_spec.GridBlock), (("reference",), _spec.ReferenceSpec),
                 (("quality",), _spec.QualitySpec)]


def _models_in(annotation, out: set) -> set:
    if isinstance(annotation, type) and issubclass(annotation, _BaseModel):
        if annotation not in out:
            out.add(annotation)
            for info in annotation.model_fields.values():
                _models_in(info.annotation, out)
    for arg in _typing.get_args(annotation):
        _models_in(arg, out)
    return out


def test_every_model_of_the_schema_is_fuzzed():
    """A section added to the study's schema is fuzzed once it has a place here."""
    assert _models_in(_Study, set()) == {model for _, model in SCHEMA_PLACES}


def _node_at(data: dict, path: tuple) -> dict | None:
    """The mapping at `path` (made where missing), or None where a change before put something else there."""
    node = data
    for key in path:
        if isinstance(key, int):
            if not isinstance(node, list) or len(node) <= key:
                return None
            node = node[key]
        else:
            if not isinstance(node, dict):
                return None
            if node.get(key) is None:
                node[key] = {}
            node = node[key]
    return node if isinstance(node, dict) else None


@st.composite
def schema_studies(draw):
    """SCHEMA_BASE with one to three keys of the schema set: valid in type, or awkward."""
    data = copy.deepcopy(SCHEMA_BASE)
    for _ in range(draw(st.integers(1, 3))):
        path, model = draw(st.sampled_from(SCHEMA_PLACES))
        node = _node_at(data, path)
        if node is None:
            continue
        if draw(st.integers(0, 5)) == 0:  # a whole section of the schema's own making
            node.clear()
            node.update(draw(_model_values(model)))
            continue
        field = draw(st.sampled_from(sorted(model.model_fields)))
        valid = draw(st.integers(0, 2)) > 0
        node[field] = draw(_from_annotation(model.model_fields[field].annotation, field) if valid else values)
    return data


@st.composite
def typed_flags(draw):
    """SCHEMA_BASE with flags every engine types, in its engine section or a grid block, of any value."""
    data = copy.deepcopy(SCHEMA_BASE)
    engine = draw(st.sampled_from(sorted(_ENGINES)))
    flags = draw(st.dictionaries(flag_keys, numbers | st.booleans() | scalars | st.just({"method": "mtp"}), min_size=1,
                                 max_size=3))
    if draw(st.booleans()):
        data["engines"][engine]["flags"] = {**data["engines"][engine].get("flags", {}), **flags}
    else:
        block = {"engine": engine, "models": ["tiny"]}
        if draw(st.booleans()):
            block["flags"] = flags
        else:
            block["axes"] = {k: [v] for k, v in flags.items()}
        data["grids"]["g"]["blocks"].append(block)
    return data


def _dump(data) -> bytes:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False).encode("utf-8", "surrogatepass")


SCHEMA_DRY = ["sweep", "--config", "study.yaml", "--grid", "g", "--dry-run"]


def test_the_schema_base_study_passes():
    _run(SCHEMA_DRY, {"study.yaml": _dump(SCHEMA_BASE)}, one_line=True)


@fuzz(120)
@given(study=schema_studies())
def test_a_study_generated_from_the_schema_ends_in_exit_0_or_one_line_and_exit_2(study):
    _run(SCHEMA_DRY, {"study.yaml": _dump(study)}, one_line=True)


@fuzz(60)
@given(study=typed_flags())
def test_any_typed_engine_flag_ends_in_exit_0_or_one_line_and_exit_2(study):
    _run(SCHEMA_DRY, {"study.yaml": _dump(study)}, one_line=True)


# -- results files with extreme floats --------------------------------------------------------

extreme_floats = st.sampled_from([0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1e-310, 1e-300, 1e15, 1.0000001e15,
                                  1e300, 1.7976931348623157e308, 1, 0.999999, 1.000001]) | \
    st.floats(min_value=0, allow_nan=False, allow_infinity=False)


@st.composite
def extreme_results(draw):
    data = copy.deepcopy(SEED)
    for _ in range(draw(st.integers(1, 4))):
        run = draw(st.sampled_from(data["runs"]))
        metric = draw(st.sampled_from(sorted(run["metrics"]) + ["success_rate", "duration_s"]))
        run["metrics"][metric] = draw(extreme_floats)
    return json.dumps(data).encode()


@fuzz(80)
@given(results=extreme_results(), fmt=st.sampled_from(["text", "markdown", "json"]))
def test_a_results_file_with_extreme_floats_ends_in_exit_0_or_one_line_and_exit_2(results, fmt):
    _run(["analyze", "--results", "results.json", "--format", fmt], {"results.json": results}, one_line=True)
