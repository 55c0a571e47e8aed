"""Redirects a client of a semsearch server follows: within the server's origin only.

A redirect to another port, host name or scheme (https to http included),
to a URL holding credentials, or to anything but an http(s) URL is refused
before anything is sent there, so the request and its API key stay with
the server the caller named.
"""

from __future__ import annotations

import urllib.parse
import urllib.request

from retriever.errors import SemsearchError
from retriever.unicode_policy import printable


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only within the origin (scheme, host name, port) of the request that got it.

    Any other redirect raises ``SemsearchError`` (``redirect_refusal`` says
    why) before a request is sent to its target. Within the origin, 307 and
    308 repeat the method and body; 301, 302 and 303 turn a POST into a GET
    without a body, and refuse other methods, as ``urllib`` does.
    """

    def http_error_302(self, req, fp, code, msg, headers):
        location = headers["location"] if "location" in headers else headers["uri"] if "uri" in headers else None
        if location is not None:
            self._refuse_unless_same_origin(req.full_url, location, fp)
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        self._refuse_unless_same_origin(req.full_url, newurl, fp)  # the URL urllib made of the Location
        if code in (307, 308):
            return urllib.request.Request(
                newurl,
                data=req.data,
                headers=req.headers,
                method=req.get_method(),
                origin_req_host=req.origin_req_host,
                unverifiable=True,
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)

    @staticmethod
    def _refuse_unless_same_origin(current: str, location: str, answer) -> None:
        problem = redirect_refusal(current, location)
        if problem is not None:
            answer.close()
            raise SemsearchError(problem)


#: An opener that follows only redirects within the origin.
SAME_ORIGIN_OPENER = urllib.request.build_opener(SameOriginRedirects)


def redirect_refusal(current: str, location: str) -> str | None:
    """Why a redirect from the URL ``current`` to ``location`` (relative or absolute) must not be followed, or None.

    It is followed only when ``location`` resolves to an http(s) URL of the
    same scheme, host name (compared without case) and port (the scheme's
    default when none is written) as ``current``, without credentials.
    """
    here = urllib.parse.urlsplit(current)
    try:
        target = urllib.parse.urlsplit(urllib.parse.urljoin(current, location))
        _ = target.port  # a port that is no number, or out of range, raises ValueError
    except ValueError:
        target = None
    if target is None or target.scheme not in ("http", "https") or not target.hostname:
        return (
            f"the semsearch server at {origin(here)} redirected to {printable(location, 80)}, which is not an "
            "http(s) URL: not followed"
        )
    if origin_key(target) != origin_key(here):
        return (
            f"the semsearch server at {origin(here)} redirected to {origin(target)}, another origin: not "
            "followed, so that neither the request nor the API key goes there (if it is your server, give its "
            "URL to RemoteCollection)"
        )
    if target.username is not None or target.password is not None:
        return f"the semsearch server at {origin(here)} redirected to a URL with credentials in it: not followed"
    return None


def origin_key(parts: urllib.parse.SplitResult) -> tuple[str, str, int | None]:
    """``(scheme, host name, port)`` of a URL: lower-case, the scheme's default port when none is written."""
    port = parts.port if parts.port is not None else {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, parts.hostname or "", port


def origin(parts: urllib.parse.SplitResult) -> str:
    """The origin of a URL as ``scheme://host[:port]``, safe to print; the port only when it is not the default."""
    scheme, host, port = origin_key(parts)
    host = f"[{host}]" if ":" in host else host
    shown = host if host.isascii() and host.isprintable() and len(host) <= 100 else printable(host, 100)
    return f"{scheme}://{shown}" + ("" if port == {"http": 80, "https": 443}.get(scheme) else f":{port}")
