"""farm/store/auth.py's calls to a server (`api_answer`, the login probe; `experiment_access`, the
read and write probes): one request each, sent by MLflow's own client, never retried, whatever
the status; no answer is a value, not an exception. Against a real local HTTP server (the
standard library's) that counts what it was sent and answers as told."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from actors.proc import free_port
from farm.store.auth import ApiAnswer, api_answer, experiment_access


class Server:
    """A local server: `answers` maps a path to (status, headers, body); `seen` lists the paths asked."""

    def __init__(self, answers: dict[str, tuple[int, dict, dict]], delay_s: float = 0.0):
        self.answers, self.delay_s, self.seen = answers, delay_s, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                path = self.path.split("?", 1)[0]
                outer.seen.append((self.command, path))
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                status, headers, body = outer.answers.get(path, (404, {}, {"error_code": "ENDPOINT_NOT_FOUND"}))
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the timeout test)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(answers, delay_s=0.0):
        servers.append(Server(answers, delay_s))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


@pytest.fixture(autouse=True)
def no_login(monkeypatch, tmp_path):
    for var in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def test_the_login_probe_is_one_request_whatever_the_status(serve):
    server = serve({"/api/2.0/mlflow/experiments/search": (500, {}, {"error_code": "INTERNAL_ERROR"})})
    assert api_answer(server.uri, 5) == ApiAnswer(500)
    assert server.seen == [("GET", "/api/2.0/mlflow/experiments/search")]  # no retry of the 5xx


def test_the_login_probe_reads_the_challenge_of_a_401(serve):
    server = serve({"/api/2.0/mlflow/experiments/search": (401, {"WWW-Authenticate": 'Basic realm="mlflow"'}, {})})
    assert api_answer(server.uri, 5) == ApiAnswer(401, challenge="basic")


def test_no_answer_is_a_value_not_an_exception(serve):
    gone = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    answer = api_answer(gone, 5)
    assert answer.status is None and answer.failure and answer.failure != "timeout"
    slow = serve({}, delay_s=3)
    assert api_answer(slow.uri, 1) == ApiAnswer(None, failure="timeout")
    assert experiment_access(gone, 5, experiment="team").read is None


def test_the_access_probes_read_then_write_once_each(serve):
    server = serve({"/api/2.0/mlflow/experiments/get-by-name": (200, {}, {"experiment": {"experiment_id": "7"}}),
                    "/api/2.0/mlflow/runs/create": (403, {}, {"error_code": "PERMISSION_DENIED"})})
    access = experiment_access(server.uri, 5, experiment="team")
    assert (access.read, access.write, access.experiment_id) == (200, 403, "7")
    assert server.seen == [("GET", "/api/2.0/mlflow/experiments/get-by-name"), ("POST", "/api/2.0/mlflow/runs/create")]


def test_an_experiment_not_there_is_not_written_to(serve):
    server = serve({})
    access = experiment_access(server.uri, 5, experiment="not-made-yet")
    assert (access.read, access.write) == (404, None) and len(server.seen) == 1
