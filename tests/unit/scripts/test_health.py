"""scripts/health.py, the scripts' one wait for a server (bench/chaos.py, serve_tiny_model.py): a
server that answers is ready, one that exits first is told apart from one that never answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from health import wait_healthy  # noqa: E402

from actors.proc import free_port  # noqa: E402


def _python(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_server_that_answers_is_ready():
    port = free_port()
    proc = _python("import http.server as h\n"
                   "class A(h.BaseHTTPRequestHandler):\n"
                   "    def do_GET(self): self.send_response(200); self.end_headers()\n"
                   f"h.HTTPServer(('127.0.0.1', {port}), A).serve_forever()")
    try:
        assert wait_healthy(proc, f"http://127.0.0.1:{port}/health", 30, interval_s=0.1) == "ready"
    finally:
        proc.kill()
        proc.wait()


def test_a_crash_and_a_timeout_are_different_answers():
    crashed = _python("raise SystemExit(3)")
    assert wait_healthy(crashed, f"http://127.0.0.1:{free_port()}/health", 30, interval_s=0.1) == "exited"
    hung = _python("import time; time.sleep(60)")
    try:
        assert wait_healthy(hung, f"http://127.0.0.1:{free_port()}/health", 0.5, interval_s=0.1) == "timeout"
    finally:
        hung.kill()
        hung.wait()
