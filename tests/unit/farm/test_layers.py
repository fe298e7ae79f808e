"""The pure layer never imports ray or mlflow (checked in a fresh interpreter), and farm's modules
import one another without a cycle (function-level imports included).

The layer order itself is an import-linter contract (pyproject.toml, `lint-imports`)."""

from __future__ import annotations

import subprocess
import sys

PURE = ["farm.study.spec", "farm.study.load", "farm.study.grid", "farm.study.trial", "farm.analysis.results",
        "farm.analysis.outcome",
        "farm.analysis.select", "farm.analysis.plan", "farm.report", "farm.engines", "farm.engines.vllm",
        "farm.engines.sglang", "farm.engines.mock", "farm.secrets", "farm.store.schema", "farm.store.base",
        "farm.store.results_store", "actors.bench_client", "actors.datasets", "farm.inputs"]


def test_pure_modules_import_neither_ray_nor_mlflow():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in PURE) +
            "bad = [m for m in ('ray', 'mlflow') if m in sys.modules]\nprint(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]


def test_no_import_cycle_among_farms_modules():
    """grid -> plan -> select -> grid was one (hidden in function-level imports); none is left."""
    import grimp

    g = grimp.build_graph("farm", "actors", cache_dir=None)
    graph = {m: sorted(i for i in g.find_modules_directly_imported_by(m) if i.split(".")[0] in ("farm", "actors"))
             for m in sorted(g.modules)}
    assert _cycles(graph) == []
