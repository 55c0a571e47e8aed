"""The HTTP API (``app.server.create_app``) served by uvicorn in a thread of the test process, on a loopback port.

Faster than a ``semsearch serve`` subprocess (no second interpreter, the
export cache already warm) for tests of clients such as ``RemoteCollection``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Iterator

from tests.processes import free_port


@contextlib.contextmanager
def live_server(collection: Path, api_key: str | None = None, deadline_s: float = 30.0) -> Iterator[str]:
    """Serve ``collection`` until the block ends; yields the base URL (``http://127.0.0.1:PORT``).

    ``deadline_s`` is generous by default: the tests share slow machines, and a 503 would be noise here.
    """
    import uvicorn

    from app.server import create_app

    app = create_app(collection, api_key=api_key, deadline_s=deadline_s)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name=f"semsearch-test-server-{port}", daemon=True)
    thread.start()
    started = time.monotonic()
    while not server.started:
        if not thread.is_alive() or time.monotonic() - started > 60:
            raise AssertionError(f"the test server on port {port} did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
