"""``semsearch keys``: make, list and remove the API keys of ``semsearch serve --keys-file``.

A key is shown once, when made; the file keeps only its SHA-256 hash and
its scopes (``app.server.access``), and is written atomically, readable by
its owner only. ``add`` and ``remove`` read, change and write the file
holding a lock (``.NAME.lock`` beside it), so commands run at once each see
the others' changes: no added key is lost, no removed one comes back.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from app.commands.base import EXIT_OK, Parser, UsageError, add_commands

LOCK_TIMEOUT_S = 30.0  # how long a command waits for another holding the keys file's lock


def register(sub) -> None:
    """Add ``keys`` to the command's subparsers."""
    add_commands(
        sub, [("keys", "make, list or remove the scoped API keys of `semsearch serve --keys-file`", add_keys_flags)]
    )


def add_keys_flags(p: argparse.ArgumentParser) -> None:
    """``keys add NAME --scope S``, ``keys list``, ``keys remove NAME``, each with ``-f/--keys-file``."""
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=Parser)
    add = actions.add_parser("add", help="make a key, print it once, and store its hash")
    add.add_argument("name", help="the key's name, shown in logs and 403 answers")
    add.add_argument(
        "--scope",
        action="append",
        required=True,
        metavar="COLLECTION:read|write|admin",
        help="what the key may do; repeat or separate with commas; '*' is every collection "
        "(write includes read; admin, the /admin/ routes such as snapshots, includes write)",
    )
    listing = actions.add_parser("list", help="the keys' names and scopes (never the keys)")
    remove = actions.add_parser("remove", help="remove a key: a server reading the file refuses it within seconds")
    remove.add_argument("name")
    for action in (add, listing, remove):
        action.add_argument("-f", "--keys-file", required=True, metavar="FILE", help="the keys file")
    p.set_defaults(handler=run_keys)


def run_keys(args) -> int:
    """Carry out ``add``, ``list`` or ``remove`` on the keys file."""
    from app.server.access import ApiKey, KeyRing, check_name, digest, new_token, parse_scopes

    path = Path(args.keys_file).expanduser()
    if args.action == "list":
        ring = KeyRing.load(path)
        if not ring:
            print(f"semsearch: {path} holds no key", file=sys.stderr)
        for key in ring.keys:
            print(f"{key.name}\t" + ",".join(f"{c}:{a}" for c, a in sorted(key.scopes.items())))
        return EXIT_OK
    name = check_name(args.name, "key name")
    if args.action == "remove":
        with locked(path):
            ring = KeyRing.load(path)
            if name not in {k.name for k in ring.keys}:
                raise UsageError(f"{path} has no key named {name!r}")
            save(path, KeyRing([k for k in ring.keys if k.name != name]))
        print(
            f"semsearch: removed key {name!r} from {path}; a server reading this file refuses it within seconds",
            file=sys.stderr,
        )
        return EXIT_OK
    scopes = parse_scopes(",".join(args.scope))
    token = new_token()
    with locked(path):
        ring = KeyRing.load(path)
        if name in {k.name for k in ring.keys}:
            raise UsageError(f"{path} already has a key named {name!r}: remove it first, or choose another name")
        save(path, ring.merged(KeyRing([ApiKey(name, digest(token), scopes)])))
    print(token)
    print(
        f"semsearch: key {name!r} ({', '.join(f'{c}:{a}' for c, a in sorted(scopes.items()))}) added to {path}; "
        "this is the only time it is shown",
        file=sys.stderr,
    )
    return EXIT_OK


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the keys file's lock (``.NAME.lock`` beside ``path``, made readable by its owner only) inside the block.

    Raises:
        UsageError: Another command held it for ``LOCK_TIMEOUT_S`` seconds.
    """
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.with_name(f".{path.name}.lock")
    try:
        with FileLock(str(lock_path), timeout=LOCK_TIMEOUT_S, mode=0o600):
            yield
    except Timeout:
        raise UsageError(
            f"{path} is being changed by another `semsearch keys` (it has held {lock_path} for over "
            f"{LOCK_TIMEOUT_S:g} s); try again"
        ) from None


def save(path: Path, ring) -> None:
    """Write the keys file atomically, readable and writable by its owner only."""
    from retriever.storage.atomic import atomic_write

    def write(tmp: Path) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("# semsearch API keys: NAME sha256:HASH SCOPES (made by `semsearch keys`)\n" + ring.text())

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, write)
