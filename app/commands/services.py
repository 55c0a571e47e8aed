"""``semsearch ui`` (Streamlit), ``semsearch serve`` (the HTTP API) and ``semsearch mcp``: long-running services.

The UI and the API refuse to listen beyond loopback without a password or
key, and check that the address can be listened on before anything is
loaded. ``serve --watch DIR`` keeps the served collection in sync with
folders from a thread of the server (``app.commands.watching.watch_beside``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from app.commands.base import EXIT_FAILURE, EXIT_OK, UsageError, add_collection_arg, add_commands
from app.commands.watching import add_serve_watch_flags, check_serve_watch, watch_beside
from app.loopback import is_loopback, named_hosts
from app.ui import PAGE_SCRIPT

UI_PASSWORD_ENV = "SEMSEARCH_UI_PASSWORD"  # read by the UI (app.ui.signin), which asks every session for it


def register(sub) -> None:
    """Add ``ui``, ``serve`` and ``mcp`` to the command's subparsers."""
    add_commands(
        sub,
        [
            ("ui", "start the search UI in the browser (Streamlit)", add_ui_flags),
            ("serve", "start the HTTP API (FastAPI; OpenAPI docs at /docs)", add_serve_flags),
            (
                "mcp",
                "serve a collection to MCP clients over stdio or HTTP (tools: search, fetch, fields)",
                add_mcp_flags,
            ),
        ],
    )


def add_mcp_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch mcp``: ``-c``, and ``--http`` with its address and key."""
    add_collection_arg(p)
    p.add_argument("--http", action="store_true", help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="with --http: address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8001, help="with --http: port (default 8001)")
    p.add_argument(
        "--api-key",
        metavar="KEY",
        help="with --http: require this key on every request; needed to "
        "listen on any address but loopback (prefer $SEMSEARCH_API_KEY or --api-key-file)",
    )
    p.add_argument("--api-key-file", metavar="FILE", help="with --http: read the key from the first line of FILE")
    p.set_defaults(handler=run_mcp)


def run_mcp(args) -> int:
    """Answer MCP over stdin/stdout until the client closes it, or over HTTP until interrupted.

    The SDK, the address and the key are checked before the collection opens.
    """
    if importlib.util.find_spec("mcp") is None:
        raise UsageError("semsearch mcp needs the MCP SDK: pip install 'semsearch[mcp]'")
    if not args.http:
        if args.api_key or args.api_key_file or args.host != "127.0.0.1" or args.port != 8001:
            raise UsageError("--host, --port and --api-key apply to --http only; stdio needs no address or key")
        from app.mcp_server import serve_stdio

        serve_stdio(args.collection)
        return EXIT_OK
    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise UsageError("semsearch mcp --http needs the HTTP server as well: pip install 'semsearch[mcp,api]'")
    from app.server import API_KEY_ENV

    key = api_key(args, os.environ.get(API_KEY_ENV))
    check_address(args.host, args.port, key)
    from app.mcp_server import serve_http

    print(
        f"semsearch: MCP for {args.collection} at http://{args.host}:{args.port}/mcp"
        f"{' (API key required)' if key else ''}",
        file=sys.stderr,
    )
    serve_http(args.collection, args.host, args.port, key)
    return EXIT_OK


def add_ui_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch ui``: ``-c`` (a collection or a folder of them), ``--host``, ``--port``."""
    p.add_argument(
        "-c",
        "--collection",
        required=True,
        metavar="DIR",
        help="collection directory, or a folder whose sub-folders are collections",
    )
    p.add_argument("--port", type=int, default=8501, help="port (default 8501)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; any other address needs a password in $SEMSEARCH_UI_PASSWORD)",
    )
    p.set_defaults(handler=run_ui)


def add_serve_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch serve``; ``--deadline`` defaults to the service's (needs FastAPI, checked first)."""
    require_api_extra()
    from app.server.limits import DEFAULT_DEADLINE_S

    p.add_argument(
        "-c",
        "--collection",
        required=True,
        action="append",
        metavar="[NAME=]DIR",
        help="collection directory; repeat as NAME=DIR to serve several, each under "
        "/collections/NAME, or give a folder whose sub-folders are collections",
    )
    add_access_flags(p)
    add_service_flags(p, DEFAULT_DEADLINE_S)
    add_serve_watch_flags(p)
    p.set_defaults(handler=run_serve)


def add_access_flags(p: argparse.ArgumentParser) -> None:
    """``serve``'s address and keys: where it listens and whom it answers."""
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--api-key",
        metavar="KEY",
        help="require this key on every route but /health; needed to listen "
        "on any address but loopback. Other users see it in `ps`: prefer $SEMSEARCH_API_KEY or "
        "--api-key-file",
    )
    p.add_argument("--api-key-file", metavar="FILE", help="read the key from the first line of FILE instead")
    p.add_argument(
        "--keys-file",
        metavar="FILE",
        help="keys scoped to read, write or administer each collection, "
        "stored as hashes (make them with `semsearch keys add`), read again when the file changes or on "
        "SIGHUP; also taken from $SEMSEARCH_KEYS",
    )


def add_service_flags(p: argparse.ArgumentParser, default_deadline_s: float) -> None:
    """``serve``'s snapshots, deadline, access log and worker processes."""
    p.add_argument(
        "--snapshot-root",
        metavar="DIR",
        help="keep snapshots taken over HTTP (POST /admin/snapshot, "
        "an admin scope) in DIR/<collection>/<name>, a folder apart from the collections; without it "
        "the service takes none",
    )
    p.add_argument(
        "--max-snapshots",
        type=int,
        default=20,
        metavar="N",
        help="snapshots of a collection kept under --snapshot-root at most (default %(default)s)",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=default_deadline_s,
        metavar="SECONDS",
        help="stop a request that runs longer and answer 503 (default %(default)g)",
    )
    p.add_argument(
        "--access-log",
        action="store_true",
        help="print a line per request (off by default: it costs every request time)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="serve from N processes sharing the port, each with its own encoder on an N-th of the "
        "cores and its own memory (default 1)",
    )


def run_ui(args) -> int:
    """Replace this process with Streamlit running ``app/ui/page.py`` on the collection (or folder of them)."""
    root = Path(args.collection).expanduser()
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root} is a file; -c takes a collection directory or a folder of collections")
    if not root.exists() and not root.parent.is_dir():
        raise UsageError(f"{root}: no such directory")
    if importlib.util.find_spec("streamlit") is None:
        raise UsageError("the UI needs Streamlit: pip install 'semsearch[ui]'")
    if not is_loopback(args.host) and not os.environ.get(UI_PASSWORD_ENV):
        raise UsageError(
            f"refusing to serve the UI on {args.host} without a password: set {UI_PASSWORD_ENV} "
            "(every browser session must then enter it), or keep --host on loopback"
        )
    check_listen(args.host, args.port)
    argv = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(PAGE_SCRIPT),
        "--server.address",
        args.host,
        "--server.port",
        str(args.port),
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--server.maxUploadSize",
        "50",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
        "--client.showErrorDetails",
        "none",
        "--theme.primaryColor",
        "#4f46e5",
        *ui_allowed_hosts(args.host),
    ]
    env = dict(os.environ, SEMSEARCH_UI_COLLECTION=str(root.resolve()))
    print(f"semsearch: UI for {root} at http://{args.host}:{args.port}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)  # the process becomes Streamlit: Ctrl-C and signals reach it
    return EXIT_FAILURE  # pragma: no cover - execve does not return


def ui_allowed_hosts(host: str) -> list[str]:
    """Streamlit flags accepting only loopback ``Host`` names and ``host`` (DNS rebinding), unless a password is set."""
    if os.environ.get(UI_PASSWORD_ENV):
        return []
    names = ["localhost", "127.0.0.1", "::1", *sorted(named_hosts([host]))]
    return [flag for name in dict.fromkeys(names) for flag in ("--server.allowedHosts", name)]


def require_api_extra() -> None:
    """Raise ``UsageError`` naming the extra to install when FastAPI or uvicorn is missing."""
    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise UsageError("the HTTP API needs FastAPI and uvicorn: pip install 'semsearch[api]'")


def run_serve(args) -> int:
    """Serve the collections on uvicorn, in one process or ``--workers`` processes sharing the port."""
    import uvicorn

    from app.server import API_KEY_ENV
    from app.server.service import key_ring

    check_serve_args(args)
    collections, mounted = served_collections(args.collection)
    check_serve_watch(args, mounted)
    ring = key_ring(api_key(args, os.environ.get(API_KEY_ENV)), scoped_keys(args.keys_file))
    check_address(args.host, args.port, bool(ring))
    warn_unserved_scopes(ring, collections)
    options = {
        "host": args.host,
        "port": args.port,
        "log_level": "info",
        "server_header": False,
        "access_log": args.access_log,
    }
    ready_dir = None
    if args.workers > 1:  # worker processes build the app themselves, from these settings
        ready_dir = prepare_workers(args, collections, mounted, ring)
        app, options = "app.server:app_from_environment", options | {"factory": True, "workers": args.workers}
    else:
        app = serving_app(args, collections, mounted, ring)
        if args.watch:
            watch_beside(app, args)  # the collection kept in sync with folders, in a thread of this process
    if args.workers == 1 and hasattr(ring, "reload_on"):
        ring.reload_on(signal.SIGHUP)  # with workers, SIGHUP makes uvicorn replace them: they read the file anew
    print_serving(args, collections, mounted, ring)
    try:
        uvicorn.run(app, **options)
    finally:
        if ready_dir is not None:
            shutil.rmtree(ready_dir, ignore_errors=True)
    return EXIT_OK


def serving_app(args, collections: dict[str, Path], mounted: bool, ring):
    """The one-process ASGI app: the collections mounted by name, or the one collection at the root."""
    from app.server import create_app
    from app.server.multi import create_multi_app

    if mounted:
        return create_multi_app(
            collections,
            keys=ring,
            deadline_s=args.deadline,
            allowed_hosts=(args.host,),
            snapshot_root=args.snapshot_root,
            max_snapshots=args.max_snapshots,
        )
    ((name, path),) = collections.items()
    return create_app(
        path,
        keys=ring,
        name=name,
        deadline_s=args.deadline,
        allowed_hosts=(args.host,),
        snapshot_root=args.snapshot_root,
        max_snapshots=args.max_snapshots,
    )


def print_serving(args, collections: dict[str, Path], mounted: bool, ring) -> None:
    """One line on stderr: what is served where, with how many keys and workers."""
    from app.server.multi import PREFIX

    where = (
        ", ".join(f"{n} at {PREFIX}/{n}" for n in collections)
        if mounted
        else f"{next(iter(collections.values()))} (scopes name it {next(iter(collections))!r})"
        if ring
        else str(next(iter(collections.values())))
    )
    print(
        f"semsearch: serving {where} on http://{args.host}:{args.port} (API docs at /docs"
        f"{f'; {len(ring)} key(s) accepted' if ring else ''}"
        f"{f'; {args.workers} worker processes' if args.workers > 1 else ''})",
        file=sys.stderr,
    )


def served_collections(values: list[str]) -> tuple[dict[str, Path], bool]:
    """``-c`` values as ``({name: directory}, mounted)``; mounted: routes under ``/collections/NAME``.

    One ``-c DIR`` holding a collection is served at the root, named by its
    folder; ``NAME=DIR``, a repeated ``-c`` or a folder of collections mounts
    each under its name.

    Raises:
        UsageError: A directory that is neither a collection nor a folder of them, a bad or repeated name.
    """
    from app.server.access import check_name
    from app.ui.folders import find_collections
    from retriever.errors import BadInputError

    collections: dict[str, Path] = {}
    mounted = len(values) > 1
    for value in values:
        name, sep, path = value.partition("=")
        if sep and name and not Path(value).exists():
            mounted, found = True, [(name, Path(path).expanduser())]
            if not (found[0][1] / "manifest.json").is_file():
                raise UsageError(f"-c {value}: {path} is not a collection (no manifest.json)")
        else:
            folders = find_collections(value)
            if not folders:
                raise UsageError(f"-c {value}: neither a collection nor a folder holding collections")
            mounted = mounted or folders[0] != Path(value).expanduser()
            found = [(folder.name, folder) for folder in folders]
        for name, folder in found:
            try:
                check_name(name, "collection name")
            except BadInputError as exc:  # said as a usage error, with the way out
                raise UsageError(f"-c {value}: {exc}; name it with -c NAME=DIR") from None
            if name in collections:
                raise UsageError(f"-c {value}: a second collection named {name!r}; name them apart with NAME=DIR")
            collections[name] = folder
    return collections, mounted


def scoped_keys(keys_file: str | None):
    """The keys of ``$SEMSEARCH_KEYS`` and ``--keys-file`` (hashes only), as one ring.

    With a keys file, a ``ReloadingKeyRing``: the file is read again when it changes.
    """
    from app.server.access import KEYS_ENV, KeyRing
    from app.server.key_reload import ReloadingKeyRing

    ring = KeyRing.parse(os.environ.get(KEYS_ENV, ""), f"${KEYS_ENV}")
    if keys_file:
        if not Path(keys_file).is_file():
            raise UsageError(f"--keys-file {keys_file}: no such file (make one with `semsearch keys add`)")
        return ReloadingKeyRing(keys_file, ring)
    return ring


def warn_unserved_scopes(ring, collections: dict[str, Path]) -> None:
    """Say which keys name a collection that is not served (a typo would otherwise be a silent 403)."""
    for key in ring.keys:
        missing = sorted(set(key.scopes) - set(collections) - {"*"})
        if missing:
            print(
                f"semsearch: note: key {key.name!r} is scoped to {', '.join(missing)}, not served here", file=sys.stderr
            )


def api_key(args, from_env: str | None) -> str | None:
    """The key from ``--api-key``, the first line of ``--api-key-file``, or ``$SEMSEARCH_API_KEY``, in that order.

    Raises:
        UsageError: ``--api-key-file`` cannot be read or its first line is empty.
    """
    if args.api_key:
        return args.api_key
    if args.api_key_file:
        try:
            lines = Path(args.api_key_file).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--api-key-file {args.api_key_file}: cannot read it ({exc})") from None
        if not lines or not lines[0].strip():
            raise UsageError(f"--api-key-file {args.api_key_file}: its first line is empty")
        return lines[0].strip()
    return from_env or None


def check_serve_args(args) -> None:
    """Refuse a deadline or worker count out of range (the address is checked once the keys are known)."""
    if not 0 < args.deadline <= 3600:
        raise UsageError(f"--deadline must be between 0 and 3600 seconds, got {args.deadline:g}")
    if not 1 <= args.workers <= 64:
        raise UsageError(f"--workers must be between 1 and 64, got {args.workers}")
    if not 1 <= args.max_snapshots <= 10_000:
        raise UsageError(f"--max-snapshots must be between 1 and 10000, got {args.max_snapshots}")


def check_address(host: str, port: int, key: str | bool | None) -> None:
    """Refuse to listen beyond loopback without an API key, or on an address already in use."""
    from app.server import API_KEY_ENV

    if not key and not is_loopback(host):
        raise UsageError(
            f"refusing to listen on {host} without an API key: pass --api-key or --keys-file, or set {API_KEY_ENV}"
        )
    check_listen(host, port)


def prepare_workers(args, collections: dict[str, Path], mounted: bool, ring) -> str:
    """Settings for ``--workers`` processes, in their environment; each gets an N-th of the cores.

    The collections are opened once here, so a wrong path fails once, not in
    every worker; the workers get the keys' hashes only.

    Returns:
        The folder where each worker marks itself ready (the caller removes it).
    """
    from app.server import SERVE_ENV
    from app.server.access import KEYS_ENV
    from app.server.key_reload import KEYS_FILE_ENV, ReloadingKeyRing
    from app.server.metrics import MULTIPROCESS_ENV
    from app.server.workers import worker_settings
    from retriever import Collection
    from retriever.encoding.threads import THREADS_ENV, available_cores

    for path in collections.values():
        Collection.open(path).close()
    snapshot_root = None
    if args.snapshot_root is not None:
        from app.server.snapshot_root import check_snapshot_root

        snapshot_root = str(check_snapshot_root(args.snapshot_root, collections.values()))
    ready_dir = tempfile.mkdtemp(prefix="semsearch-workers-")
    metrics_dir = Path(ready_dir) / "metrics"  # every worker's counts, so that /metrics reports them all
    metrics_dir.mkdir()
    os.environ.setdefault(MULTIPROCESS_ENV, str(metrics_dir))
    os.environ[SERVE_ENV] = worker_settings(
        collections, mounted, args.deadline, ready_dir, args.workers, (args.host,), snapshot_root, args.max_snapshots
    )
    if isinstance(ring, ReloadingKeyRing):  # each worker reads the file itself, and again when it changes
        os.environ[KEYS_ENV], os.environ[KEYS_FILE_ENV] = ring.fixed.text(), str(Path(ring.path).resolve())
    else:
        os.environ[KEYS_ENV] = ring.text()
    os.environ.setdefault(THREADS_ENV, str(max(1, available_cores() // args.workers)))
    return ready_dir


def check_listen(host: str, port: int) -> None:
    """Fail early, in one line, when ``host:port`` cannot be listened on.

    Raises:
        UsageError: the port is out of range or the host does not resolve.
        SemsearchError: the address cannot be bound (in use, say).
    """
    import socket

    from retriever.errors import SemsearchError

    if not 1 <= port <= 65535:
        raise UsageError(f"--port must be between 1 and 65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"cannot listen on {host}: {exc.strerror}") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise SemsearchError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
