"""Helpers for tests that run real server or browser processes."""

from __future__ import annotations

import subprocess


def stop(process: subprocess.Popen, timeout: float = 15) -> None:
    """Terminate ``process``, killing it if it has not exited within ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
