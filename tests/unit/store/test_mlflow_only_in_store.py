"""MLflow is the store's alone (issue 52): every tag, param, metric and artifact name is in
farm/store/schema.py, and every read and write of MLflow goes through a named function of
farm/store/. Outside that package no module of farm or actors imports mlflow, names its client,
takes the store's raw client (`tracking.client`) or spells one of the store's names itself.

Two checks that fail differently: the import-linter contract in pyproject.toml (`make lint`)
refuses a direct `import mlflow` outside the store, and the scan here refuses the rest; both are
shown to catch a planted example, so neither passes because it looked at nothing."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from farm.store import schema

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "farm" / "store"

# The store's names that could be spelled elsewhere: every name of schema.py with a dot in it
# (tags `farm.*` and `mlflow.*`, artifact files `*.json`, `*.md`, ...), bare words aside.
NAMES = {v for k, v in vars(schema).items() if k.isupper() and isinstance(v, str) and "." in v}

# Literals outside the store that equal a store name and are not one, each with why.
NOT_STORE_NAMES = {
    ("actors/machine.py", "farm.machine"): "the Ray node label that names a machine, not the MLflow tag",
    ("actors/bench.py", "command.txt"): "a file of the trial's own directory (uploaded under files/, as engine.log)",
    ("farm/report/layout.py", "report.md"): "the report's own file in the folder --out DIR writes (its appendix links "
                                            "it); the store keeps that folder as it is under report/ "
                                            "(tests/unit/report/test_first_screen.py pins the names alike)",
}


def mlflow_uses(source: str) -> list[str]:
    """What a module does with MLflow itself: an import of mlflow, MLflow's client by name, the
    store's raw client, or a literal that spells one of the store's names."""
    out = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            out += [f"{line}: import {a.name}" for a in node.names if a.name.split(".")[0] == "mlflow"]
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] == "mlflow":
                out.append(f"{line}: from {node.module} import ...")
            elif node.module == "farm.store.tracking" and any(a.name == "client" for a in node.names):
                out.append(f"{line}: the store's raw client (from farm.store.tracking import client)")
        elif isinstance(node, ast.Name) and node.id == "MlflowClient":
            out.append(f"{line}: MlflowClient")
        elif isinstance(node, ast.Attribute) and node.attr == "MlflowClient":
            out.append(f"{line}: MlflowClient")
        elif (isinstance(node, ast.Attribute) and node.attr == "client" and isinstance(node.value, ast.Name)
              and node.value.id == "tracking"):
            out.append(f"{line}: the store's raw client (tracking.client)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES:
            out.append(f"{line}: the store's name {node.value!r} spelled here")
    return out


def _modules_outside_the_store() -> list[Path]:
    return sorted(p for root in ("farm", "actors") for p in (ROOT / root).rglob("*.py")
                  if STORE not in p.parents)


def test_nothing_outside_the_store_uses_mlflow():
    modules = _modules_outside_the_store()
    assert len(modules) > 50  # farm's packages and the actors, not an empty folder
    found = []
    for path in modules:
        rel = path.relative_to(ROOT).as_posix()
        for use in mlflow_uses(path.read_text()):
            if not any(rel == where and repr(name) in use for (where, name) in NOT_STORE_NAMES):
                found.append(f"{rel}:{use}")
    assert found == [], "MLflow outside farm/store/ (a name belongs in schema.py, a call in a store function):\n" + \
        "\n".join(found)


def test_the_scan_finds_each_kind_of_use_planted_in_a_module():
    planted = '''
import mlflow
import mlflow.tracking as mt
from mlflow.tracking import MlflowClient
from farm.store import tracking
from farm.store.tracking import client

def f(uri, run):
    mlflow.tracking.MlflowClient(uri)
    tracking.client(uri).set_tag(run, "farm.strategy", "halving")
    tracking.read_artifact(uri, run, "halving.json")
    tracking.load_results(uri, run)  # a named store function: fine
'''
    found = mlflow_uses(planted)
    for expected in ("import mlflow", "import mlflow.tracking", "from mlflow.tracking import", "MlflowClient",
                     "(tracking.client)", "(from farm.store.tracking import client)", "'farm.strategy'",
                     "'halving.json'"):
        assert any(expected in f for f in found), (expected, found)
    assert not any(f.startswith("12:") for f in found)  # load_results is how the rest of farm reads


def test_the_scan_sees_the_store_use_mlflow():
    """Where MLflow is allowed, the same scan finds it: it reads the modules it is given."""
    assert any("import" in u for u in mlflow_uses((STORE / "tracking.py").read_text()))
    assert any("tracking.client" in u for u in mlflow_uses((STORE / "searches.py").read_text()))


def test_the_import_contract_covers_every_package_but_the_store():
    """pyproject's contract lists its sources by hand: a package added to farm must join it."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["type"] == "forbidden" and c["forbidden_modules"] == ["mlflow"]]
    assert contract.get("allow_indirect_imports") is True  # through the store, which imports mlflow
    tops = {f"farm.{p.stem}" for p in (ROOT / "farm").iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert "farm.store" in tops and len(tops) > 8
    assert set(contract["source_modules"]) == (tops - {"farm.store"}) | {"actors"}
