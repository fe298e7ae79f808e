"""A node's guidellm client host: guidellm imported once per node and sweep, a client forked per trial.

    python -m actors.client_host SOCKET      # fork a client for each connection on SOCKET

Importing guidellm's benchmark stack (transformers, torch, datasets) costs about 4.5 s of CPU, and
a trial's own client process (`actors.guidellm_worker --serve`) paid it once per trial: a quarter of
the CPU of CI's end-to-end tests, and on 2 cores its first run waited for it. The host imports it
once and forks a client for each connection: the forked client has guidellm loaded, runs in a
session (process group) of its own, and serves its trial's runs over the connection exactly as a
`--serve` process serves them over its pipes (`guidellm_worker.serve_requests`).

The connection is the client's life: when the trial's side closes it (the trial ended, or its actor
died), the client exits after the run in hand; the trial's watchdog stops its group as it stops a
process of its own. The host itself forks from its one thread and never starts guidellm's
multiprocessing, so each client starts its own forkserver, as a spawned client does.

`ClientHost` is the Ray actor that owns a node's host process (the driver starts one on each node of
a sweep, named `host_name(node_id)` in the sweep's namespace, and ends them with the sweep). Only the
standard library is imported at the top: guidellm's forkserver re-imports this module as
`__mp_main__` in every client's forkserver.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

READY = "client host ready"


def host_name(node_id: str) -> str:
    return f"farm-client-host-{node_id[:16]}"


def _client(conn: socket.socket) -> int:
    """In the forked child: a session of its own, then one run per request line on `conn`."""
    from actors import guidellm_worker

    os.setsid()
    rfile = conn.makefile("r", encoding="utf-8")
    wfile = conn.makefile("w", encoding="utf-8", buffering=1)
    hello = json.loads(rfile.readline() or "{}")
    if hello.get("log"):
        guidellm_worker.to_log(hello["log"])
    from guidellm.logger import configure_logger

    configure_logger()  # guidellm's log sinks, as a spawned client's import sets them up (serve)
    guidellm_worker.start_forkserver()
    wfile.write(json.dumps({"pid": os.getpid()}) + "\n")
    wfile.flush()
    return guidellm_worker.serve_requests(rfile, wfile)


def serve(path: str) -> int:
    # guidellm's settings are read when it is imported: the forked clients use forkserver workers
    os.environ["GUIDELLM__MP_CONTEXT_TYPE"] = "forkserver"
    from actors import guidellm_worker  # noqa: F401 - its settings (worker count, start delay) first
    import guidellm.benchmark  # noqa: F401
    from guidellm.schemas.benchmark.entrypoints import BenchmarkScenario  # noqa: F401
    from loguru import logger

    # guidellm's log sinks each run a writer thread fed by a queue shared with every fork: a client
    # that ended a sink of the host's would stop the host's writer, and the next client's logging
    # would wait on it for ever. The host forks without sinks (nor their threads); each client
    # configures its own, writing to its own log (_client; guidellm's configure_logger replaces
    # the sinks it had made, a sink already gone included).
    logger.remove()

    def leave(*_):  # the owner's end (its watchdog's SIGTERM): the socket's directory goes with it
        shutil.rmtree(Path(path).parent, ignore_errors=True)
        os._exit(0)

    exits = Path(path).parent / "exits"
    exits.mkdir(exist_ok=True)

    def reap(*_):  # each client's exit code, for its trial's record (it is not the trial's child)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            (exits / str(pid)).write_text(str(os.waitstatus_to_exitcode(status)))

    signal.signal(signal.SIGTERM, leave)
    signal.signal(signal.SIGCHLD, reap)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)  # in a directory only this user can enter (ClientHost)
    server.listen(64)
    print(READY, flush=True)
    while True:
        conn, _ = server.accept()
        pid = os.fork()
        if pid == 0:
            server.close()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 1
            try:
                code = _client(conn)
            except BaseException:  # noqa: BLE001 - why this client ended goes to its log; the trial starts its own
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        conn.close()


class ClientHost:
    """Owns one node's host process (own process group, output to its log, a watchdog that stops it
    when this actor dies)."""

    def __init__(self) -> None:
        from actors.bench_client import client_env
        from actors.proc import watch_group

        # AF_UNIX paths are short (108 bytes) and the directory keeps other users out
        self.dir = Path(tempfile.mkdtemp(prefix="farm-client-host-"))
        self.path = str(self.dir / "host.sock")
        self.log = self.dir / "host.log"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "actors.client_host", self.path],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=client_env(), start_new_session=True)
        self.watchdog = watch_group(self.proc.pid, 5.0)

    def address(self, timeout_s: float = 120.0) -> str | None:
        """The host's socket once it listens; None if it exited or is not ready within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None:
            if READY in self.log.read_text(errors="replace"):
                return self.path
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)
        return None

    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        """End the host (its clients are their trials'): the driver asks before it ends the actor,
        since Ray kills an actor's children outright, and the socket's directory would stay behind."""
        from actors.bench_client import kill_group

        kill_group(self.proc.pid, self.proc.wait)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.watchdog.kill()
        self.watchdog.wait(timeout=5)


def main(argv: list[str]) -> int:
    return serve(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
