"""An admission limit in front of `guidellm mock-server`: N requests served at once, the rest queued.

    python mock_gate.py --limit N [--state-blocks B] --listen-host H --listen-port P -- guidellm mock-server ARGS...

guidellm's mock-server releases its `--max-concurrent-requests` semaphore before a response's
stream starts, so its latency does not grow with load. This gate does what a real engine's batch
limit does: it starts the mock-server (with `--port` of its own choosing) as its child, in its
process group, and forwards every request, streamed responses chunk by chunk, holding one of N
slots until the response ends; requests beyond N wait in arrival order (asyncio's semaphore is
FIFO). With a fixed service time S per request, a load above N concurrent requests makes the
extra ones wait about S for a slot: TTFT jumps by S past N, a known capacity for tests.

A file run by path with aiohttp and the standard library only: the engine process runs it with
farm's interpreter, whatever `farm` is importable as there.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import subprocess
import sys

from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

# Per-hop headers, and the ones aiohttp sets itself for the body it sends.
_DROP = {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "te", "trailer",
         "proxy-connection"}


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _headers(headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _DROP}


def make_app(upstream: str, limit: int) -> web.Application:
    slots = asyncio.Semaphore(limit)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app["in_flight"] = 0

    async def start(app: web.Application) -> None:
        app["session"] = ClientSession(connector=TCPConnector(limit=0), timeout=ClientTimeout(total=None),
                                       auto_decompress=False)

    async def stop(app: web.Application) -> None:
        await app["session"].close()

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        # Only generation is admitted through the slots: readiness and model listing are not load.
        gated = request.method == "POST"
        if gated:
            await slots.acquire()
        try:
            async with app["session"].request(request.method, upstream + request.path_qs, data=body,
                                              headers=_headers(request.headers)) as up:
                resp = web.StreamResponse(status=up.status, headers=_headers(up.headers))
                await resp.prepare(request)
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
                return resp
        except OSError as exc:  # the mock-server not up yet (readiness polls through here) or gone
            return web.Response(status=502, text=f"mock-server unreachable: {exc}")
        finally:
            if gated:
                slots.release()

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


async def _serve(args: argparse.Namespace, server: list[str]) -> int:
    port = _free_port(args.listen_host)
    # The mock-server is this process's child, in its process group: stopping the engine's group stops both.
    child = subprocess.Popen(server + ["--host", args.listen_host, "--port", str(port)])
    runner = web.AppRunner(make_app(f"http://{args.listen_host}:{port}", args.limit), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.listen_host, args.listen_port).start()
    print(f"mock gate: {args.limit} request(s) at once on {args.listen_host}:{args.listen_port} -> :{port}", flush=True)
    if args.report:
        # The line a real engine's start log has (SGLang: "max_running_requests=79"), for farm to read.
        print(f"farm mock: max_running_requests={args.limit}", flush=True)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    try:
        while not stopped.is_set() and child.poll() is None:
            try:
                await asyncio.wait_for(stopped.wait(), timeout=0.5)
            except asyncio.TimeoutError:
                pass
    finally:
        await runner.cleanup()
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
    return child.returncode if child.returncode and not stopped.is_set() else 0


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: mock_gate.py --limit N --listen-host H --listen-port P -- SERVER ARGS...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="mock_gate.py")
    parser.add_argument("--limit", type=int, required=True)
    parser.add_argument("--listen-host", default="127.0.0.1")
    parser.add_argument("--listen-port", type=int, required=True)
    parser.add_argument("--report", action="store_true", help="state the limit as an engine's start log does")
    parser.add_argument("--state-blocks", type=int, default=None,
                        help="refuse to start when more requests at once are asked for, naming the limit")
    args = parser.parse_args(argv[:cut])
    if args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.state_blocks is not None and args.limit > args.state_blocks:
        # What vLLM does with a hybrid model whose state blocks are fewer than max_num_seqs: the
        # start stops before serving, and the log names the most it would take.
        print(f"farm mock: ValueError: max_running_requests ({args.limit}) exceeds the state blocks "
              f"({args.state_blocks}); lower it to at most {args.state_blocks}", file=sys.stderr, flush=True)
        return 1
    return asyncio.run(_serve(args, argv[cut + 1:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
