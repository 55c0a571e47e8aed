"""``semsearch keys``: make, list and remove the API keys of ``semsearch serve --keys-file``.

A key is shown once, when made; the file keeps only its SHA-256 hash and
its scopes (``app.server.access``), and is written atomically, readable by
its owner only.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from app.commands.base import EXIT_OK, Parser, UsageError, add_commands


def register(sub) -> None:
    """Add ``keys`` to the command's subparsers."""
    add_commands(sub, [("keys", "make, list or remove the scoped API keys of `semsearch serve --keys-file`",
                        add_keys_flags)])


def add_keys_flags(p: argparse.ArgumentParser) -> None:
    """``keys add NAME --scope S``, ``keys list``, ``keys remove NAME``, each with ``-f/--keys-file``."""
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=Parser)
    add = actions.add_parser("add", help="make a key, print it once, and store its hash")
    add.add_argument("name", help="the key's name, shown in logs and 403 answers")
    add.add_argument("--scope", action="append", required=True, metavar="COLLECTION:read|write",
                     help="what the key may do; repeat or separate with commas; '*' is every collection "
                     "(write includes read)")
    listing = actions.add_parser("list", help="the keys' names and scopes (never the keys)")
    remove = actions.add_parser("remove", help="remove a key: it is refused from the server's next start")
    remove.add_argument("name")
    for action in (add, listing, remove):
        action.add_argument("-f", "--keys-file", required=True, metavar="FILE", help="the keys file")
    p.set_defaults(handler=run_keys)


def run_keys(args) -> int:
    """Carry out ``add``, ``list`` or ``remove`` on the keys file."""
    from app.server.access import ApiKey, KeyRing, check_name, digest, new_token, parse_scopes

    path = Path(args.keys_file).expanduser()
    ring = KeyRing.load(path)
    if args.action == "list":
        if not ring:
            print(f"semsearch: {path} holds no key", file=sys.stderr)
        for key in ring.keys:
            print(f"{key.name}\t" + ",".join(f"{c}:{a}" for c, a in sorted(key.scopes.items())))
        return EXIT_OK
    name = check_name(args.name, "key name")
    if args.action == "remove":
        if name not in {k.name for k in ring.keys}:
            raise UsageError(f"{path} has no key named {name!r}")
        save(path, KeyRing([k for k in ring.keys if k.name != name]))
        print(f"semsearch: removed key {name!r} from {path}; a running server refuses it once restarted",
              file=sys.stderr)
        return EXIT_OK
    if name in {k.name for k in ring.keys}:
        raise UsageError(f"{path} already has a key named {name!r}: remove it first, or choose another name")
    scopes = parse_scopes(",".join(args.scope))
    token = new_token()
    save(path, ring.merged(KeyRing([ApiKey(name, digest(token), scopes)])))
    print(token)
    print(f"semsearch: key {name!r} ({', '.join(f'{c}:{a}' for c, a in sorted(scopes.items()))}) added to {path}; "
          "this is the only time it is shown", file=sys.stderr)
    return EXIT_OK


def save(path: Path, ring) -> None:
    """Write the keys file atomically, readable and writable by its owner only."""
    from retriever.storage.atomic import atomic_write

    def write(tmp: Path) -> None:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("# semsearch API keys: NAME sha256:HASH SCOPES (made by `semsearch keys`)\n" + ring.text())

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, write)
