"""scripts/venv-install.py: what pip's configuration says reaches uv, so a uv install resolves as
pip's would (this project's machines keep torch's CPU build in a local wheel directory and cap it
with a constraints file, both in pip's configuration).

The install test is real: a fresh venv, real `pip config list`, the real uv of farm's own venv
(which `make setup` installed through this script), and versions of a local wheel of which the
configured constraint allows one, spread over the sources pip's configuration names. The indexes are
local directories, so nothing can come from PyPI.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "venv-install.py"


def _load_module():
    spec = importlib.util.spec_from_file_location("venv_install", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


vi = _load_module()


def _pip_env(tmp_path: Path, config: str, **variables: str) -> dict[str, str]:
    """An environment whose pip reads only this config file and these PIP_* variables."""
    conf = tmp_path / "pip.conf"
    conf.write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(PIP_CONFIG_FILE=str(conf), **variables)
    return env


def _wheel(directory: Path, version: str) -> None:
    """A minimal pure-python wheel of `demo-pkg` that says its version when imported."""
    files = {
        "demo_pkg/__init__.py": f'VERSION = "{version}"\n',
        f"demo_pkg-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: demo-pkg\nVersion: {version}\n",
        f"demo_pkg-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b'=').decode()},{len(body.encode())}"
              for name, body in files.items()]
    record.append(f"demo_pkg-{version}.dist-info/RECORD,,")
    files[f"demo_pkg-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(directory / f"demo_pkg-{version}-py3-none-any.whl", "w") as whl:
        for name, body in files.items():
            whl.writestr(name, body)


def test_each_key_comes_from_the_scope_pip_itself_would_use(tmp_path, monkeypatch):
    """A PIP_* variable beats [install], which beats [global]; lists are split into one flag each."""
    env = _pip_env(tmp_path,
                   "[global]\nindex-url = https://global.example/simple\n"
                   "extra-index-url = https://a.example/simple https://b.example/simple\n"
                   "constraint = /global/constraints.txt\n"
                   "[install]\nconstraint = /install/constraints.txt\n"
                   "trusted-host = mirror.internal\n"
                   "[freeze]\nfind-links = /not/for/install\n",
                   PIP_INDEX_URL="https://env.example/simple", PIP_FIND_LINKS="/wheels/one /wheels/two")
    for key in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(key)
    for key in [k for k in env if k.startswith("PIP_")]:
        monkeypatch.setenv(key, env[key])
    options = vi.uv_options(vi.pip_config(sys.executable))
    pairs = list(zip(options[::2], options[1::2]))
    assert ("--index-url", "https://env.example/simple") in pairs
    assert ("--index-url", "https://global.example/simple") not in pairs
    assert ("--extra-index-url", "https://a.example/simple") in pairs and ("--extra-index-url", "https://b.example/simple") in pairs
    assert ("--constraint", "/install/constraints.txt") in pairs
    assert ("--constraint", "/global/constraints.txt") not in pairs
    assert [v for f, v in pairs if f == "--find-links"] == ["/wheels/one", "/wheels/two"]
    assert ("--allow-insecure-host", "mirror.internal") in pairs
    assert "--no-index" not in options
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip's switch: nothing from any index, uv's too
    assert "--no-index" in vi.uv_options(vi.pip_config(sys.executable))


def _index(root: Path, version: str) -> str:
    """A file:// simple index (PEP 503) that offers one version of demo-pkg."""
    project = root / "demo-pkg"
    project.mkdir(parents=True)
    _wheel(project, version)
    name = f"demo_pkg-{version}-py3-none-any.whl"
    (project / "index.html").write_text(f'<html><body><a href="{name}">{name}</a></body></html>\n')
    return f"file://{root}"


def test_a_uv_install_resolves_as_pip_would_from_pips_configuration(tmp_path):
    """Three sources as pip's configuration names them: the index (1.5), an extra index (1.0) and
    find-links (2.0), under a constraint `<2`. pip takes the best allowed version across all of
    them, 1.5; uv on its own would take 1.0 from the first index that has the package, and 2.0
    without the constraint."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    assert uv, f"farm's venv has no uv ({Path(sys.executable).parent}): `make setup` installs it through {SCRIPT.name}"
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "2.0")
    (tmp_path / "constraints.txt").write_text("demo-pkg<2\n")
    env = _pip_env(tmp_path,
                   f"[global]\nindex-url = {_index(tmp_path / 'index', '1.5')}\n"
                   f"extra-index-url = {_index(tmp_path / 'extra', '1.0')}\n"
                   f"[install]\nconstraint = {tmp_path / 'constraints.txt'}\n",
                   PIP_FIND_LINKS=str(wheels))
    target = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
    (target / "bin" / "uv").symlink_to(uv)  # the script would otherwise fetch uv from the index
    done = subprocess.run([sys.executable, str(SCRIPT), str(target), "demo-pkg"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "installing with pip" not in done.stderr  # uv did it, not the fallback
    version = subprocess.run([str(target / "bin" / "python"), "-c", "import demo_pkg; print(demo_pkg.VERSION)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "1.5"
    # compiled as pip compiles what it installs: no process recompiles the venv's modules at import
    assert list((target / "lib").glob("python3.*/site-packages/demo_pkg/__pycache__/__init__.*.pyc"))
