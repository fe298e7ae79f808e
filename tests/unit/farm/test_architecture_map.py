"""ARCHITECTURE.md's map is true: every module of farm/ and actors/ has its line in its room, and
the page names no module, path or `farm.`/`actors.` name that is gone (issue 52, item 5).

The convention: under `## The map: every module in its room`, one heading per package
(### `farm/analysis/stats/`) and one line per module under the heading of the package it is in,
starting with its path from the repository root in backticks (- `farm/analysis/stats/blocks.py`: ...).
A package's `__init__.py` needs a line only where it holds more than its docstring."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MAPPED = ("farm", "actors")  # scripts/ are tools around farm, not mapped
MAP = "## The map: every module in its room"
ENTRY = re.compile(r"^- `([^`]+)`")
ROOM = re.compile(r"^### `([^`]+/)`")
# A path the page names anywhere: under a mapped package or tests/, ending in .py or a folder.
PATH = re.compile(r"(?<![\w./-])((?:farm|actors|tests)/[\w./-]*(?:\.py|/))")
# A module or a name in one; not an MLflow name or a Ray label (`farm.machine.*`, `farm.machine=m1`).
DOTTED = re.compile(r"(?<![\w./-])((?:farm|actors)(?:\.\w+)+)(?!\w|\.\w|\.\*|=)")


def module_files(root: Path) -> list[str]:
    """Every module the map must name, as a path from `root`."""
    out = []
    for top in MAPPED:
        for f in sorted((root / top).rglob("*.py")):
            if "__pycache__" in f.parts:
                continue
            if f.name == "__init__.py":
                body = ast.parse(f.read_text()).body
                if all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body):
                    continue  # only a docstring (or nothing): the package's heading names it
            out.append(f.relative_to(root).as_posix())
    return out


def read_map(text: str) -> tuple[list[tuple[str, str | None]], set[str]]:
    """The map section's lines, as (module path, the room heading it is under), and its rooms."""
    lines = text.splitlines()
    entries: list[tuple[str, str | None]] = []
    rooms: set[str] = set()
    if MAP not in lines:
        return entries, rooms
    room = None
    for line in lines[lines.index(MAP) + 1:]:
        if line.startswith("## "):
            break
        if m := ROOM.match(line):
            room = m.group(1)
            rooms.add(room)
        elif m := ENTRY.match(line):
            entries.append((m.group(1), room))
    return entries, rooms


def _top_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def dotted_exists(root: Path, name: str) -> bool:
    """`farm.a.b` is a package or module, or a module followed by a name defined at its top level
    (`farm.store.base.SweepStore`; what follows that name, a method or field, is not checked)."""
    parts = name.split(".")
    here = root / parts[0]
    i = 1
    while i < len(parts) and (here / parts[i]).is_dir():
        here, i = here / parts[i], i + 1
    if i == len(parts):
        return here.is_dir()
    if (here / f"{parts[i]}.py").exists():
        module, i = here / f"{parts[i]}.py", i + 1
        if i == len(parts):
            return True
    else:
        module = here / "__init__.py"
    return module.exists() and parts[i] in _top_names(module)


def problems(root: Path, text: str, page: str = "ARCHITECTURE.md") -> list[str]:
    """What is untrue of the map, each as the edit that makes it true."""
    out = []
    modules = module_files(root)
    entries, rooms = read_map(text)
    if not entries:
        return [f"{page} has no section '{MAP}' with lines '- `path/to/module.py`: what it holds'"]
    named: dict[str, int] = {}
    for path, room in entries:
        named[path] = named.get(path, 0) + 1
        if not (root / path).is_file():
            out.append(f"{page} maps `{path}`, which does not exist: remove its line (or rename it to the module's "
                       f"path now)")
        elif room != Path(path).parent.as_posix() + "/":
            out.append(f"{page} maps `{path}` under ### `{room}`: move its line under ### "
                       f"`{Path(path).parent.as_posix()}/`")
    out += [f"{page} maps `{path}` {n} times: keep one line" for path, n in named.items() if n > 1]
    for path in modules:
        if path in named:
            continue
        room = Path(path).parent.as_posix() + "/"
        where = (f"under ### `{room}`" if room in rooms else
                 f"under a new heading ### `{room}` (its package has none yet)")
        out.append(f"`{path}` is not on {page}'s map: add the line\n    - `{path}`: <what it holds, in one line>\n"
                   f"  {where} in '{MAP}'")
    for path in sorted(set(PATH.findall(text)) - set(named)):  # a stale map line is said once, above
        if not (root / path).exists():
            out.append(f"{page} names `{path}`, which does not exist: remove or correct it")
    for name in sorted(set(DOTTED.findall(text))):
        if not dotted_exists(root, name):
            out.append(f"{page} names `{name}`, which does not exist: remove or correct it")
    return out


def test_architecture_maps_every_module_and_nothing_that_is_gone():
    found = problems(ROOT, (ROOT / "ARCHITECTURE.md").read_text())
    assert not found, "ARCHITECTURE.md's map is not true:\n" + "\n".join(found)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for path, body in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(body)
    return tmp_path


def _page(*lines: str) -> str:
    return "\n".join(["# Architecture", "", MAP, "", *lines, "", "## Next section", "- `not/a/module.py`: a line of another section, not the map's"])


def test_a_true_map_has_no_problem(tmp_path):
    root = _tree(tmp_path, {"farm/__init__.py": '"""The package."""\n', "farm/a.py": "def f():\n    pass\n",
                            "farm/sub/__init__.py": "", "farm/sub/b.py": "X = 1\n", "actors/c.py": ""})
    page = _page("### `farm/`", "- `farm/a.py`: a", "### `farm/sub/`", "- `farm/sub/b.py`: b",
                 "### `actors/`", "- `actors/c.py`: c", "", "`farm.a.f`, `farm.sub.b.X`, `farm.sub`, farm/sub/")
    assert problems(root, page) == []


def test_a_module_off_the_map_is_named_with_the_line_to_add(tmp_path):
    root = _tree(tmp_path, {"farm/a.py": "", "farm/sub/new.py": "", "farm/other/d.py": "", "actors/c.py": "",
                            "farm/engines/__init__.py": "ENGINES = {}\n"})
    page = _page("### `farm/`", "- `farm/a.py`: a", "### `farm/sub/`", "### `actors/`", "- `actors/c.py`: c")
    found = problems(root, page)
    assert len(found) == 3, found
    assert found[0] == ("`farm/engines/__init__.py` is not on ARCHITECTURE.md's map: add the line\n"
                        "    - `farm/engines/__init__.py`: <what it holds, in one line>\n"
                        f"  under a new heading ### `farm/engines/` (its package has none yet) in '{MAP}'")
    assert "under a new heading ### `farm/other/`" in found[1]
    assert found[2].startswith("`farm/sub/new.py` is not on ARCHITECTURE.md's map: add the line\n"
                               "    - `farm/sub/new.py`: ")
    assert "under ### `farm/sub/` in" in found[2]


def test_a_stale_line_a_misplaced_one_and_a_twice_named_one_are_refused(tmp_path):
    root = _tree(tmp_path, {"farm/a.py": "", "farm/sub/b.py": ""})
    page = _page("### `farm/`", "- `farm/a.py`: a", "- `farm/gone.py`: a module since removed", "- `farm/sub/b.py`: b",
                 "### `farm/sub/`", "- `farm/sub/b.py`: b")
    found = problems(root, page)
    assert "ARCHITECTURE.md maps `farm/gone.py`, which does not exist: remove its line (or rename it to the " \
           "module's path now)" in found
    assert "ARCHITECTURE.md maps `farm/sub/b.py` under ### `farm/`: move its line under ### `farm/sub/`" in found
    assert "ARCHITECTURE.md maps `farm/sub/b.py` 2 times: keep one line" in found
    assert len(found) == 3, found


def test_a_path_or_a_dotted_name_that_is_gone_is_refused_anywhere_on_the_page(tmp_path):
    root = _tree(tmp_path, {"farm/a.py": "def f():\n    pass\n", "farm/pkg/__init__.py": "from x import y as z\n"})
    page = _page("### `farm/`", "- `farm/a.py`: a", "### `farm/pkg/`", "- `farm/pkg/__init__.py`: z",
                 "", "Read `farm/old.py`, tests/unit/gone/, `farm.a.g`, `farm.spec` and `farm.a.f`, `farm.pkg.z`.",
                 "Not modules: the tags `farm.machine.*`, the node label `farm.machine=m1`.")
    assert problems(root, page) == [
        "ARCHITECTURE.md names `farm/old.py`, which does not exist: remove or correct it",
        "ARCHITECTURE.md names `tests/unit/gone/`, which does not exist: remove or correct it",
        "ARCHITECTURE.md names `farm.a.g`, which does not exist: remove or correct it",
        "ARCHITECTURE.md names `farm.spec`, which does not exist: remove or correct it",
    ]


def test_the_real_tree_with_a_planted_module_fails(tmp_path):
    """The check on farm's own page and a copy of its tree, with one module planted in farm/analysis/:
    that module is the one new problem (the copy has no tests/, so the page's test paths are others)."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    for top in MAPPED:
        for f in (ROOT / top).rglob("*.py"):
            if "__pycache__" not in f.parts:
                _tree(tmp_path, {f.relative_to(ROOT).as_posix(): f.read_text()})
    before = set(problems(tmp_path, text))
    _tree(tmp_path, {"farm/analysis/planted.py": '"""A module nobody mapped."""\n'})
    new = set(problems(tmp_path, text)) - before
    assert new == {"`farm/analysis/planted.py` is not on ARCHITECTURE.md's map: add the line\n"
                   "    - `farm/analysis/planted.py`: <what it holds, in one line>\n"
                   f"  under ### `farm/analysis/` in '{MAP}'"}
