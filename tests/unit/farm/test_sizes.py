"""Product code stays readable in one sitting (issue 52, item 4): no function over 80 lines, no
module over 500, in farm/ and actors/. An exception, if one is ever needed, is named in OVER with
the size it may not grow past; the test fails when one grows, when a new one goes over, and when
a named one has come under the limit (then its line goes, so the list only shrinks)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
MAX_FUNCTION, MAX_MODULE = 80, 500

# Over the limit on purpose: "path" or "path:function" -> the lines it may not grow past. None today.
OVER: dict[str, int] = {}


def sizes(root: Path = REPO) -> dict[str, int]:
    """Every module's lines and every function's (its `def` to its last line), over the limits only."""
    out: dict[str, int] = {}
    for package in ("farm", "actors"):
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text()
            name = path.relative_to(root).as_posix()
            if (lines := text.count("\n")) > MAX_MODULE:
                out[name] = lines
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if (lines := node.end_lineno - node.lineno + 1) > MAX_FUNCTION:
                        out[f"{name}:{node.name}"] = max(lines, out.get(f"{name}:{node.name}", 0))
    return out


def test_no_function_over_80_lines_and_no_module_over_500_but_the_named_ones():
    now = sizes()
    new = {k: v for k, v in now.items() if k not in OVER}
    grown = {k: (OVER[k], v) for k, v in now.items() if k in OVER and v > OVER[k]}
    under = [k for k in OVER if k not in now]
    assert not new, f"over the limit ({MAX_FUNCTION} lines a function, {MAX_MODULE} a module): {new}"
    assert not grown, f"grown past the size they were allowed (allowed, now): {grown}"
    assert not under, f"now under the limit: take their lines out of OVER: {under}"


def test_the_check_sees_a_long_function_and_a_long_module(tmp_path):
    (tmp_path / "farm").mkdir()
    (tmp_path / "actors").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    (tmp_path / "farm" / "long.py").write_text(f"def f():\n{body}\n" + "y = 1\n" * 420)
    (tmp_path / "actors" / "short.py").write_text("def g():\n    return 1\n")
    assert sizes(tmp_path) == {"farm/long.py": 502, "farm/long.py:f": 81}
