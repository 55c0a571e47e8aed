"""Helpers for tests that run real server or browser processes."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from pathlib import Path


def stop(process: subprocess.Popen, timeout: float = 15) -> None:
    """Terminate ``process``, killing it if it has not exited within ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_listening(process: subprocess.Popen, port: int, log: Path, timeout: float = 60) -> None:
    """Return once something accepts connections on ``port``; fail the test, with ``log``, if ``process``
    exits first or ``timeout`` seconds pass."""
    import pytest

    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            pytest.fail(f"{' '.join(map(str, process.args))} exited with {process.returncode}: {log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"nothing listened on port {port} within {timeout:g} s: {log.read_text()}")
            time.sleep(0.2)


def answer_json(handler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    """Send ``status`` and the JSON ``body`` (with ``headers``) from an ``http.server`` request handler; a client
    that hung up meanwhile is no error."""
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    with contextlib.suppress(OSError):
        handler.wfile.write(body)
