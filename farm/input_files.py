"""The files a user hands farm, read under its limits: bytes (a regular file of at most a given
size), text (UTF-8, with or without a byte-order mark, else refused with the offending byte's line
and column), and YAML and JSON documents (depth, YAML's expanded size and aliases, duplicate keys,
finite numbers that fit 64 bits), each failure one `UserError` (or `SpecError`) naming the file.

Part of farm's one input boundary: `farm.inputs` re-exports every name here, and its docstring says
what farm accepts. Pure: no ray or mlflow import here.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import yaml

from farm.errors import SpecError, UserError

STUDY_MAX_BYTES = 1 << 20  # 1 MiB: the largest study in configs/ is under 8 KB
RESULTS_MAX_BYTES = 128 << 20  # 128 MiB: about 80,000 runs in the seed-results.json format
DATASET_MAX_BYTES = 4 << 30  # 4 GiB: ShareGPT V3, the largest in use, is 0.7 GiB
MAX_DEPTH = 32  # a study nests about 7 levels, a results file 4
YAML_MAX_NODES = 100_000  # after following aliases; the default study has about 1,000
INT_MAX = 2**63 - 1  # MLflow, numpy and guidellm store whole numbers in 64 bits


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
QUOTE_CHARS = 40  # how much of a refused value an error line quotes


def quoted(value: str, limit: int = QUOTE_CHARS) -> str:
    """A value as an error line quotes it: shortened, and escaped where it is not printable (a
    newline, a terminal escape, a lone surrogate), so the error stays one line a terminal shows."""
    short = value if len(value) <= limit else value[:limit] + "..."
    return "'" + "".join(c if c.isprintable() and not _SURROGATE.match(c) else repr(c)[1:-1] for c in short) + "'"

def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}".replace(".0 ", " ")
        n /= 1024
    return str(n)


# --------------------------------------------------------------------------------------
# files -> text


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bytes(path: str | Path, *, what: str, max_bytes: int, shown: str | None = None, error=UserError) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; a FIFO or device is never opened (a
    read from one could block or never end). `shown`: the path as the user wrote it."""
    shown = shown or str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error("file not found", file=shown) from None
    except NotADirectoryError:
        raise error("file not found (a folder on its path is a file)", file=shown) from None
    except PermissionError:
        raise error("permission denied", file=shown) from None
    except ValueError:  # a NUL byte in the path
        raise error("not a valid path (it contains a NUL byte)", file=shown) from None
    except OSError as exc:  # name too long, a symlink loop, ...
        raise error(f"cannot read it ({exc.strerror or type(exc).__name__})", file=shown) from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"is {_kind_of(st.st_mode)}, not a {what}", file=shown)
    if st.st_size > max_bytes:
        raise error(f"is {_size(st.st_size)}; a {what} may be at most {_size(max_bytes)}", file=shown)
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"cannot read it ({exc.strerror or type(exc).__name__})", file=shown) from None
    if len(data) > max_bytes:  # it grew since stat
        raise error(f"is larger than {_size(max_bytes)}, the most a {what} may be", file=shown)
    return data


_UTF16_32_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                  (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def decode_text(data: bytes, *, shown: str, error=UserError) -> str:
    """UTF-8 only, with or without a byte-order mark: what every editor writes by default, and
    the one encoding YAML, JSON and MLflow agree on."""
    advice = "farm reads UTF-8 only: save it as UTF-8"
    for bom, name in _UTF16_32_BOMS:
        if data.startswith(bom):
            raise error(f"is {name} text; {advice}", file=shown)
    if b"\x00" in data:
        looks = "UTF-16 text" if data.count(b"\x00") * 3 >= len(data) else "a binary file"
        raise error(f"contains NUL bytes (it looks like {looks}); {advice}", file=shown)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[:exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        raise error(f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, column {column}); {advice}",
                    file=shown) from None
    return text.removeprefix("\ufeff")


def read_text(path: str | Path, *, what: str, max_bytes: int, shown: str | None = None, error=UserError) -> str:
    shown = shown or str(path)
    return decode_text(read_bytes(path, what=what, max_bytes=max_bytes, shown=shown, error=error), shown=shown,
                       error=error)


# --------------------------------------------------------------------------------------
# numbers and nesting of parsed data


class _Unparsable:
    """A JSON number Python cannot hold (more digits than int() takes), kept to be reported with
    its key path."""

    def __init__(self, text: str):
        self.text = text


class _NonFinite:
    """NaN, Infinity or -Infinity in JSON (Python's json accepts them; JSON does not)."""

    def __init__(self, text: str):
        self.text = text


def _child_path(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def check_values(data: Any, *, shown: str, error=UserError) -> None:
    """Every number finite and within 64 bits, nesting at most `MAX_DEPTH`: walked without
    recursion, so no depth can overflow the stack here."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        where = path or None
        if isinstance(value, (dict, list)):
            if depth >= MAX_DEPTH:
                raise error(f"nested deeper than {MAX_DEPTH} levels", file=shown, key=where)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            if isinstance(value, dict):
                for k in value:
                    if isinstance(k, str) and (_CONTROL.search(k) or _SURROGATE.search(k)):
                        # a key is a name farm prints, logs and stores (a model, a profile, a flag)
                        raise error(f"the key {quoted(k)} is not a name of one line (control characters or "
                                    f"invalid text)", file=shown, key=where)
            stack.extend((v, _child_path(path, k), depth + 1) for k, v in items)
        elif isinstance(value, str):
            if _SURROGATE.search(value):  # YAML's "\ud800" or JSON's "\udc80": not text, UTF-8 cannot hold it
                raise error(f"{quoted(value)} holds a lone surrogate escape, which is not text (no UTF-8 for it)",
                            file=shown, key=where)
        elif isinstance(value, bool) or value is None:
            continue
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise error(f"expected a finite number, got {value}", file=shown, key=where)
        elif isinstance(value, int):
            if abs(value) > INT_MAX:
                raise error(f"the number {value:.3g} is out of range (at most {INT_MAX} in size)", file=shown,
                            key=where)
        elif isinstance(value, _NonFinite):
            raise error(f"expected a finite number, got {value.text} (JSON has no NaN or Infinity; "
                        "write null for a missing value)", file=shown, key=where)
        elif isinstance(value, _Unparsable):
            raise error(f"the number {value.text[:12]}... ({len(value.text)} digits) is out of range",
                        file=shown, key=where)


# --------------------------------------------------------------------------------------
# YAML


def _yaml_error(exc: yaml.YAMLError, text: str, shown: str, error) -> UserError:
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[:exc.position]
        line, column = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        return error(f"character U+{exc.character:04X} is not allowed in YAML", file=shown,
                     key=f"line {line} column {column}")
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}" if mark is not None else None
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return error(f"malformed YAML: {problem}", file=shown, key=where)


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses nesting deeper than `MAX_DEPTH` while it composes. Its
    composer is recursive (its parser is not), so the depth is checked before each collection is
    entered: the deepest it recurses is `MAX_DEPTH` levels."""

    def __init__(self, text: str, shown: str, error):
        super().__init__(text)
        self._shown, self._error, self._depth = shown, error, 0

    def compose_node(self, parent, index):
        if not self.check_event(yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise self._error(f"nested deeper than {MAX_DEPTH} levels", file=self._shown,
                              key=f"line {self.peek_event().start_mark.line + 1}")
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expanded(root: yaml.Node, shown: str, error) -> None:
    """Nodes and depth of the document as a loader expands it (an alias counts as the whole
    node it names): a "billion laughs" of nested aliases is refused here, in time linear in the
    file, instead of being walked. An alias that contains itself is refused too."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        ident = id(node)
        if done:
            kids = _children(node)
            size[ident] = 1 + sum(size[id(k)] for k in kids)
            depth[ident] = 1 + max((depth[id(k)] for k in kids), default=0)
            on_path.discard(ident)
            if size[ident] > YAML_MAX_NODES:
                raise error(f"expands to more than {YAML_MAX_NODES:,} values with its aliases followed",
                            file=shown, key=f"line {node.start_mark.line + 1}")
            if depth[ident] > MAX_DEPTH:
                raise error(f"nested deeper than {MAX_DEPTH} levels with its aliases followed", file=shown,
                            key=f"line {node.start_mark.line + 1}")
            continue
        if ident in size:
            continue
        if ident in on_path:
            raise error("an alias refers to the node that contains it (a recursive structure)", file=shown,
                        key=f"line {node.start_mark.line + 1}")
        on_path.add(ident)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def _check_duplicate_keys(node: yaml.Node, path: str, file: str, error) -> None:
    """YAML itself lets a later key silently replace an earlier one (a flag given twice): refuse.
    (Depth and size were checked first, so this walk is bounded.)"""
    if isinstance(node, yaml.MappingNode):
        lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            where = f"{path}.{key}" if path else str(key)
            if key is not None and key != "<<":
                line = key_node.start_mark.line + 1
                if key in lines:
                    raise error(f"given twice (lines {lines[key]} and {line})", file=file, key=where)
                lines[key] = line
            _check_duplicate_keys(value_node, where, file, error)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicate_keys(item, f"{path}[{i}]", file, error)


def load_yaml(text: str, *, shown: str, error=SpecError) -> Any:
    """YAML text -> Python data, within the limits above, with no duplicate keys. The text is
    parsed once: the limits are checked on the composed document, which is then constructed
    (three parses took 2.2-2.7x as long; every `farm` command reads a study)."""
    loader = None
    try:
        loader = _Loader(text, shown, error)  # its reader refuses control characters here
        root = loader.get_single_node()
        if root is None:
            data = None
        else:
            _check_expanded(root, shown, error)  # sizes and depth with aliases followed, before any walk
            _check_duplicate_keys(root, "", shown, error)
            data = loader.construct_document(root)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, shown, error) from None
    except ValueError as exc:  # int() of a number with more digits than Python converts
        if "digits" in str(exc):
            raise error(f"a whole number in it has more than {sys.get_int_max_str_digits()} digits (out of range)",
                        file=shown) from None
        raise error(f"a value in it cannot be read ({str(exc).splitlines()[0][:120]})", file=shown) from None
    except RecursionError:  # not expected after the depth check; never a traceback all the same
        raise error(f"nested deeper than {MAX_DEPTH} levels", file=shown) from None
    finally:
        if loader is not None:
            loader.dispose()
    check_values(data, shown=shown, error=error)
    return data


def read_yaml_file(path: str | Path, *, what: str = "study file", shown: str | None = None, error=SpecError) -> Any:
    """`shown`: the path as the user wrote it, when `path` is its resolved form."""
    shown = shown or str(path)
    text = read_text(path, what=what, max_bytes=STUDY_MAX_BYTES, shown=shown, error=error)
    return load_yaml(text, shown=shown, error=error)


# --------------------------------------------------------------------------------------
# JSON


def _int_or_unparsable(text: str) -> int | _Unparsable:
    try:
        return int(text)
    except ValueError:
        return _Unparsable(text)


def _pairs_once(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        self.key = key


def load_json(text: str, *, shown: str, error=UserError) -> Any:
    """JSON text -> Python data: strict JSON numbers (no NaN/Infinity), no key given twice in an
    object, at most `MAX_DEPTH` levels."""
    try:
        data = json.loads(text, parse_constant=_NonFinite, parse_int=_int_or_unparsable,
                          object_pairs_hook=_pairs_once)
    except json.JSONDecodeError as exc:
        raise error(f"not valid JSON: {exc.msg}", file=shown, key=f"line {exc.lineno} column {exc.colno}") from None
    except _DuplicateKey as exc:
        raise error(f"key '{exc.key}' given twice in one object", file=shown) from None
    except RecursionError:  # the parser recurses once per level, in C, up to Python's limit
        raise error(f"nested deeper than {MAX_DEPTH} levels", file=shown) from None
    check_values(data, shown=shown, error=error)
    return data


def read_json_file(path: str | Path, *, what: str, max_bytes: int = RESULTS_MAX_BYTES, error=UserError) -> Any:
    return load_json(read_text(path, what=what, max_bytes=max_bytes, error=error), shown=str(path), error=error)
