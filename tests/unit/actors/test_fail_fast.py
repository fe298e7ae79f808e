"""An engine whose log names a fatal error and then goes quiet is not waited for to the end of
its readiness timeout (up to 30 minutes of a GPU); one that keeps writing after such a line, and
gets ready, is waited for. The engine processes here replay real engine logs
(tests/fixtures/engine-logs/, SOURCES.md says where each comes from) through farm's own
`EngineProcess`, then hang the way those engines did, or recover and serve."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from actors.proc import EngineProcess, FatalInLog, free_port
from farm.engines import get_engine

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "engine-logs"

# Writes a log file to stdout, then hangs (the engine's parent process waiting on a dead child).
HANG = "import sys, time; sys.stdout.write(open(sys.argv[1]).read()); sys.stdout.flush(); time.sleep(600)"
# Writes the log, goes on logging for a while (a retried allocation), then serves /health.
RECOVER = """
import http.server, sys, time
sys.stdout.write(open(sys.argv[1]).read()); sys.stdout.flush()
for i in range(int(sys.argv[3])):
    print(f"INFO still starting ({i})", flush=True); time.sleep(1)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[2])), H).serve_forever()
"""


@pytest.mark.parametrize("engine, log, status", [
    ("vllm", "vllm-2025-08-engine-core-initialization-failed.log", "engine_failed_to_start"),
    ("vllm", "vllm-0.4.0-cuda-oom.log", "oom"),
    ("sglang", "sglang-2025-08-scheduler-init-failed.log", "engine_failed_to_start"),
    ("sglang", "sglang-2025-03-cuda-error-out-of-memory.log", "oom"),
])
def test_a_fatal_line_and_silence_end_the_wait(engine, log, status, tmp_path):
    adapter = get_engine(engine)
    proc = EngineProcess([sys.executable, "-c", HANG, str(LOGS / log)], {}, tmp_path / "engine.log")
    proc.start()
    try:
        with pytest.raises(FatalInLog, match="stopped waiting after"):
            proc.wait_ready(f"http://127.0.0.1:{free_port()}/health", timeout_s=1800, fatal=adapter.classify,
                            fatal_grace_s=3)
        # the engine hung: farm stops it, and the log it kept says why
        assert proc.poll() is None
        assert adapter.classify((tmp_path / "engine.log").read_text()).status == status
    finally:
        proc.stop()
    assert proc.poll() is not None


def test_an_engine_that_keeps_writing_after_a_fatal_line_is_waited_for(tmp_path):
    port = free_port()
    proc = EngineProcess([sys.executable, "-c", RECOVER, str(LOGS / "vllm-0.4.0-cuda-oom.log"), str(port), "8"], {},
                         tmp_path / "engine.log")
    proc.start()
    try:
        # It writes for 8 s after the OOM line, longer than the grace: waited for (FatalInLog would
        # end the wait), it gets ready and serves.
        proc.wait_ready(f"http://127.0.0.1:{port}/health", timeout_s=120, fatal=get_engine("vllm").classify,
                        fatal_grace_s=3)
        assert proc.poll() is None and httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).status_code == 200
        assert "INFO still starting (7)" in (tmp_path / "engine.log").read_text()
    finally:
        proc.stop()


def test_a_healthy_h200_start_log_has_no_fatal_line():
    # the check runs on every start: the real H200 starts must not look fatal
    h200 = Path(__file__).resolve().parents[3] / "bench" / "h200" / "engine-logs"
    for log in h200.glob("*.log"):
        assert get_engine("vllm").classify(log.read_text()) is None, log.name
