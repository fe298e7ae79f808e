"""farm's own `guidellm mock-server`, started through `farm/engines/mock_launch.py`: the same
command line and the same server, with torch imported only if something uses it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from farm.engines import get_engine
from farm.engines.mock import _GUIDELLM, _LAUNCH
from farm.study.spec import EngineSpec
from farm.study.trial import Trial

MOCK = get_engine("mock")


def _trial(**flags) -> Trial:
    return Trial(id="mock-1", engine="mock", model_key="tiny", model="farm-tiny", flags=flags, profiles=["p"])


def test_farm_s_own_mock_server_starts_through_the_launch_script_with_the_same_arguments():
    argv = MOCK.command(EngineSpec(), _trial(**{"ttft-ms": 100}), port=8123)
    assert argv[:3] == [sys.executable, _LAUNCH, "mock-server"] and "--ttft-ms=100" in argv
    gated = MOCK.command(EngineSpec(), _trial(**{"admission-limit": 2}), port=8123)
    assert gated[gated.index("--") + 1:][:3] == [sys.executable, _LAUNCH, "mock-server"]
    # what a user pastes is guidellm's own command
    assert MOCK.serve_command(EngineSpec(), _trial()).startswith(f"{_GUIDELLM} mock-server --model=farm-tiny")


def test_a_study_s_launcher_or_venv_is_started_as_it_is():
    mine = MOCK.command(EngineSpec(launcher=["/opt/g/bin/guidellm", "mock-server"]), _trial(), port=8123)
    assert mine[:2] == ["/opt/g/bin/guidellm", "mock-server"]
    venv = MOCK.command(EngineSpec(venv="/opt/venv"), _trial(), port=8123)
    assert venv[:2] == ["/opt/venv/bin/guidellm", "mock-server"] and _LAUNCH not in venv


def test_its_usage_errors_are_guidellm_s_and_classified_as_before():
    launched, script = (subprocess.run([*head, "mock-server", "--turbo"], capture_output=True, text=True, timeout=60)
                        for head in ([sys.executable, _LAUNCH], [_GUIDELLM]))
    assert (launched.returncode, launched.stdout, launched.stderr) == (script.returncode, script.stdout, script.stderr)
    assert launched.returncode == 2 and "Usage: guidellm mock-server" in launched.stderr
    assert MOCK.classify(launched.stderr).status == "invalid_flags"


def test_a_deferred_module_is_the_real_one_as_soon_as_it_is_used(tmp_path):
    # `email` stands in for torch: a package with submodules, not imported by a bare interpreter
    script = f"""
import sys
sys.path.insert(0, {str(Path(_LAUNCH).parent)!r})
from mock_launch import defer
assert defer("email") and not defer("email") and not defer("no_such_module_here")
import email
assert type(email).__name__ == "_Deferred" and email.__spec__.name == "email"
message = email.message_from_string("Subject: hi\\n\\nbody")  # the first use imports it
assert message["Subject"] == "hi" and type(sys.modules["email"]).__name__ == "module"
import email.mime.text
assert email.mime.text.MIMEText("x").get_payload() == "x"
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
