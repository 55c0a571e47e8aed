"""Who may do what: API keys, stored only as hashes, each scoped to read, write or administer named collections.

A keys file (``semsearch serve --keys-file FILE``) or ``$SEMSEARCH_KEYS``
holds one key a line, ``NAME sha256:HEX SCOPE[,SCOPE...]``, where a scope is
``COLLECTION:read``, ``COLLECTION:write`` (write includes read) or
``COLLECTION:admin`` (admin includes write and read), and ``*`` stands for
every collection; ``#`` starts a comment. ``semsearch keys add`` makes a
key, prints it once, and writes only its hash. A plain ``--api-key`` is a
key of scope ``*:admin``: the operator's key may do everything.

A request's key is hashed and compared with every stored hash in constant
time. No key, or one that matches none, is 401; a known key without the
scope the route needs is 403 and says which scope that is. Every route under
``/admin/`` (snapshots) administers; otherwise reading is ``GET`` and
``HEAD``, and the ``POST`` routes that change nothing (``/search``,
``/embed``, ``/eval``, ``/v1/embeddings``, ``/mcp``); every other route writes.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from app.server.responses import AsciiJSONResponse, error_body
from retriever.errors import BadInputError

KEYS_ENV = "SEMSEARCH_KEYS"
READ, WRITE, ADMIN = "read", "write", "admin"
ACTIONS = (READ, WRITE, ADMIN)  # each includes the ones before it
ALL = "*"
HASH_PREFIX = "sha256:"
TOKEN_PREFIX = "ss_"
READING_POSTS = frozenset({"/search", "/embed", "/eval", "/v1/embeddings", "/mcp"})
ADMIN_PREFIX = "/admin"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_HEX = re.compile(r"^[0-9a-f]{64}$")


def digest(token: str | bytes) -> str:
    """``sha256:HEX`` of a key (keys are random tokens, so one round of SHA-256 is enough)."""
    raw = token.encode("utf-8") if isinstance(token, str) else token
    return HASH_PREFIX + hashlib.sha256(raw).hexdigest()


def new_token() -> str:
    """A new random key: ``ss_`` and 43 URL-safe characters (256 bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def check_name(name: str, what: str) -> str:
    """``name`` when it is 1-64 letters, digits, ``_``, ``.`` or ``-`` (not first); else ``BadInputError``."""
    if not _NAME.match(name or ""):
        raise BadInputError(
            f"{what} {name!r}: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class ApiKey:
    """One key: its name, its hash, and the access it grants, ``{collection or "*": "read" | "write" | "admin"}``."""

    name: str
    hash: str
    scopes: Mapping[str, str] = field(default_factory=dict)

    def access(self, collection: str) -> str | None:
        """``"admin"``, ``"write"``, ``"read"`` or None: the most this key may do to ``collection``."""
        granted = {self.scopes.get(collection), self.scopes.get(ALL)}
        return next((action for action in reversed(ACTIONS) if action in granted), None)

    def line(self) -> str:
        """The key as a line of a keys file."""
        return f"{self.name} {self.hash} " + ",".join(f"{c}:{a}" for c, a in sorted(self.scopes.items()))


def includes(granted: str | None, needed: str) -> bool:
    """Whether the action ``granted`` (``"read"``, ``"write"``, ``"admin"`` or None) covers ``needed``."""
    return granted in ACTIONS and ACTIONS.index(granted) >= ACTIONS.index(needed)


def parse_scopes(text: str) -> dict[str, str]:
    """``"docs:read,papers:admin"`` as ``{"docs": "read", "papers": "admin"}`` (the wider grant wins a repeat)."""
    scopes: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        collection, sep, action = part.rpartition(":")
        if not sep or action not in ACTIONS:
            raise BadInputError(
                f"scope {part!r}: write COLLECTION:read, COLLECTION:write or COLLECTION:admin "
                "('*' for every collection)"
            )
        if collection != ALL:
            check_name(collection, "scope collection")
        if not includes(scopes.get(collection), action):
            scopes[collection] = action
    if not scopes:
        raise BadInputError("a key needs at least one scope, such as 'docs:read'")
    return scopes


class KeyRing:
    """The keys a service accepts.

    Args:
        keys: Each with a unique name.
    """

    def __init__(self, keys: Iterable[ApiKey] = ()) -> None:
        self.keys = list(keys)
        names = [k.name for k in self.keys]
        if len(set(names)) != len(names):
            repeated = sorted({n for n in names if names.count(n) > 1})
            raise BadInputError(f"key names must be unique; repeated: {', '.join(repeated)}")

    def __bool__(self) -> bool:
        return bool(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def plain(cls, api_key: str) -> "KeyRing":
        """One key of scope ``*:admin``: ``--api-key`` and ``$SEMSEARCH_API_KEY``."""
        return cls([ApiKey("api-key", digest(api_key), {ALL: ADMIN})])

    @classmethod
    def parse(cls, text: str, source: str) -> "KeyRing":
        """Keys from lines ``NAME sha256:HEX SCOPES`` (``;`` also ends a line, for the environment).

        Raises:
            BadInputError: A line that is not a key, naming ``source`` and the line.
        """
        keys = []
        for number, line in enumerate(re.split(r"[\n;]", text), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            try:
                if len(parts) != 3:
                    raise BadInputError("expected NAME sha256:HEX SCOPE[,SCOPE...]")
                name, hashed, scopes = parts
                if not (hashed.startswith(HASH_PREFIX) and _HEX.match(hashed[len(HASH_PREFIX) :])):
                    raise BadInputError(
                        "the hash must be 'sha256:' and 64 lower-case hex digits (keys are "
                        "stored only as hashes: make one with `semsearch keys add`)"
                    )
                keys.append(ApiKey(check_name(name, "key name"), hashed, parse_scopes(scopes)))
            except BadInputError as exc:
                raise BadInputError(f"{source}, entry {number}: {exc}") from None
        return cls(keys)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "KeyRing":
        """The keys file at ``path`` (a missing file is an empty ring, so ``keys add`` can start one)."""
        path = Path(path)
        if not path.exists():
            return cls()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInputError(f"keys file {path}: cannot read it ({exc})") from None
        return cls.parse(text, f"keys file {path}")

    def text(self) -> str:
        """The keys as a keys file."""
        return "".join(k.line() + "\n" for k in self.keys)

    def merged(self, other: "KeyRing") -> "KeyRing":
        """These keys and ``other``'s (names must stay unique)."""
        return KeyRing([*self.keys, *other.keys])

    def match(self, token: bytes) -> ApiKey | None:
        """The key whose hash is ``token``'s; every stored hash is compared, each in constant time."""
        given = digest(token).encode("ascii")
        found = None
        for key in self.keys:
            if hmac.compare_digest(given, key.hash.encode("ascii")) and found is None:
                found = key
        return found


#: ``path -> (collection name or None, the path within the collection)``; None: a route of no collection.
Resolver = Callable[[str], "tuple[str | None, str]"]


def single_collection(name: str) -> Resolver:
    """Every path is a route of the one collection ``name``."""
    return lambda path: (name, path)


def needed_access(method: str, route: str) -> str:
    """``"admin"`` for every route under ``/admin`` (whatever the method); else ``"read"`` for GET, HEAD,
    OPTIONS and the POSTs that change nothing, and ``"write"`` for anything else."""
    if ("/" + route.lstrip("/") + "/").startswith(ADMIN_PREFIX + "/"):  # "//admin/x" and "/admin" too
        return ADMIN
    if method in ("GET", "HEAD", "OPTIONS") or (method == "POST" and route.rstrip("/") in READING_POSTS):
        return READ
    return WRITE


class AccessMiddleware:
    """401 without a known key, 403 without the scope the route needs; ``open_paths`` need no key.

    Args:
        app: The ASGI app behind it.
        keys: The keys accepted.
        resolve: Which collection a path belongs to (``single_collection`` or the many-collection router's).
        open_paths: Paths answered to anyone (``/health``).
    """

    def __init__(self, app, keys: KeyRing, resolve: Resolver, open_paths: Iterable[str] = ("/health",)) -> None:
        self.app, self.keys, self.resolve, self.open = app, keys, resolve, frozenset(open_paths)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") in self.open:
            return await self.app(scope, receive, send)
        path = scope.get("path") or ""
        token = presented_key(dict(scope.get("headers") or []))
        key = None if token is None else self.keys.match(token)
        if key is None:
            problem = (
                "missing API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'"
                if token is None
                else "wrong API key"
            )
            response = AsciiJSONResponse(
                error_body(path, problem, 401), status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
            return await response(scope, receive, send)
        collection, route = self.resolve(path)
        needed = needed_access(scope.get("method", "GET"), route)
        granted = None if collection is None else key.access(collection)
        if collection is None or includes(granted, needed):
            scope.setdefault("state", {})["api_key"] = key
            return await self.app(scope, receive, send)
        response = AsciiJSONResponse(
            error_body(path, f"forbidden: {refusal(key, collection, granted, needed)}", 403), status_code=403
        )
        await response(scope, receive, send)


def refusal(key: ApiKey, collection: str, granted: str | None, needed: str) -> str:
    """Why ``key`` may not do ``needed`` to ``collection``, ending with the scope it would need."""
    if granted is None:
        problem = f"key {key.name!r} has no scope on collection {collection!r}"
    elif needed == ADMIN:
        may = "read" if granted == READ else "write to"
        problem = f"key {key.name!r} may {may} collection {collection!r} but not administer it"
    else:
        problem = f"key {key.name!r} may read collection {collection!r} but not write to it"
    return f"{problem} (needs {collection}:{needed})"


def presented_key(headers: Mapping[bytes, bytes]) -> bytes | None:
    """The key of ``X-API-Key`` or ``Authorization: Bearer``, or None."""
    given = headers.get(b"x-api-key")
    if given is None:
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        given = token.strip() if scheme.lower() == b"bearer" else None
    return given


def readable(keys: KeyRing | None, key: ApiKey | None, names: Iterable[str]) -> list[str]:
    """Of ``names``, those ``key`` may read (all of them when the service has no keys)."""
    if not keys:
        return list(names)
    return [n for n in names if key is not None and key.access(n) is not None]
