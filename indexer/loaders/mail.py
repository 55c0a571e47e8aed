"""E-mail: a message file (.eml), a mailbox (.mbox, streamed) and an Outlook message (.msg).

A message is a document titled by its subject. Its text is the body: the
``text/plain`` part where it has text, else the ``text/html`` part as text
(``markup.parse_html``). Attachments are not read; their file names are
listed in ``attachments``.

Metadata: ``source``, ``format`` (``"eml"``, ``"mbox"``, ``"msg"``),
``subject``, ``from``, ``to`` and ``cc`` (lists of addresses), ``date``
(ISO 8601, in UTC when the message gives its zone), ``message_id`` and
``attachments``, each where the message has it.

A mailbox is read a line at a time, one message held at most: a message
starts at each line beginning ``"From "`` (the mbox convention, as in
Python's ``mailbox``; writers escape such lines in bodies as ``">From "``,
and one ``">"`` is taken off again, as mboxrd readers do). Each message is
a document with id ``"<source>#<n>"`` (n from 1) and the location
``message`` n; a message over ``MAX_MESSAGE_BYTES``, or that cannot be
read, is a ``LoadError`` with that id, and the mailbox goes on.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Iterator
from email import errors, policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import extract_msg
from extract_msg.enums import RecipientType

from indexer.loaders.common import LoadError, Rejected, error_line
from indexer.loaders.located import BoundedText, located_document
from indexer.loaders.markup import parse_html
from indexer.loaders.packages import library_errors
from indexer.loaders.props import iso_timestamp, one_line
from retriever.documents import Document

MAX_MESSAGE_BYTES = 50 * 1024 * 1024  # the largest message of a mailbox read (attachments included)
_LINE_BYTES = 1024 * 1024  # a mailbox is read in lines of at most this many bytes
_MB = 1024 * 1024
_HEADERS_OF_MAIL = ("from", "to", "subject", "date", "message-id")
_QUOTED_FROM = re.compile(rb">+From ")


def read_eml(path: Path, source: str, stem: str) -> Iterator[Document]:
    """A message file (RFC 5322, ``.eml``) as one document.

    Raises:
        Rejected: unreadable, no e-mail headers, or neither text nor subject.
    """
    try:
        with path.open("rb") as handle:
            message = BytesParser(policy=policy.default).parse(handle)
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    if not any(_header(message, name) for name in _HEADERS_OF_MAIL):
        raise Rejected("not an e-mail message (no From, To, Subject, Date or Message-ID header)")
    yield _message_document(message, source, source, "eml", stem)


def read_mbox(path: Path, source: str, stem: str) -> Iterator[Document | LoadError]:
    """The messages of a mailbox, one document each (id ``"<source>#<n>"``), streamed.

    Yields:
        A ``Document`` per message, or a ``LoadError`` for a message that is
        too large or cannot be read.

    Raises:
        Rejected: the file is not a mailbox (its first line is not a ``From``
            line), or it holds no message.
    """
    count = 0
    for count, data in _mbox_messages(path):
        message_id = f"{source}#{count}"
        if data is None:
            limit = f"{MAX_MESSAGE_BYTES // _MB} MB" if MAX_MESSAGE_BYTES >= _MB else f"{MAX_MESSAGE_BYTES} byte"
            yield LoadError(message_id, f"message is over the {limit} limit")
            continue
        try:
            message = BytesParser(policy=policy.default).parsebytes(data)
            yield _message_document(message, message_id, source, "mbox", stem, number=count)
        except Rejected as exc:
            yield LoadError(message_id, str(exc))
        except Exception as exc:  # noqa: BLE001 - one malformed message is that message's error
            yield LoadError(message_id, f"malformed message ({type(exc).__name__}: {error_line(exc)})")
    if not count:
        raise Rejected("no messages in the mailbox")


def _mbox_messages(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """``(n, bytes)`` of each message of a mailbox, its ``From`` line left out; bytes None when too large.

    Raises:
        Rejected: the file cannot be read, or text comes before the first ``From`` line.
    """
    number, pieces, size, line_start = 0, [], 0, True
    try:
        with path.open("rb") as handle:
            while chunk := handle.readline(_LINE_BYTES):
                if line_start and chunk.startswith(b"From "):
                    if number:
                        yield number, (b"".join(pieces) if size <= MAX_MESSAGE_BYTES else None)
                    number, pieces, size = number + 1, [], 0
                elif number:
                    if line_start and _QUOTED_FROM.match(chunk):
                        chunk = chunk[1:]  # ">From " in a body, escaped by the writer
                    size += len(chunk)
                    if size <= MAX_MESSAGE_BYTES:
                        pieces.append(chunk)
                    else:
                        pieces = []  # too large: only its size is kept
                elif chunk.strip():
                    raise Rejected("not an mbox mailbox (its first line is not a 'From ' line)")
                line_start = chunk.endswith(b"\n")
    except OSError as exc:
        raise Rejected(exc.strerror or error_line(exc)) from None
    if number:
        yield number, (b"".join(pieces) if size <= MAX_MESSAGE_BYTES else None)


def read_msg(path: Path, source: str, stem: str) -> Iterator[Document]:
    """An Outlook message (``.msg``, extract-msg) as one document.

    Raises:
        Rejected: not a readable Outlook item, or neither text nor subject.
    """
    with library_errors("msg"):
        item = extract_msg.openMsg(str(path))
        try:
            fields = _msg_fields(item)
            body = _msg_body(item)
        finally:
            item.close()
    yield _mail_document(body, fields, source, "msg", stem)


def _msg_fields(item: Any) -> dict[str, Any]:
    """The metadata fields of an Outlook item (``subject``, addresses, ``date``, ``message_id``, ``attachments``)."""
    names = [
        getattr(attachment, "longFilename", None) or getattr(attachment, "shortFilename", None)
        for attachment in getattr(item, "attachments", None) or []
    ]
    return {
        "subject": one_line(getattr(item, "subject", None)),
        "from": _address_list(getattr(item, "sender", None)),
        "to": _recipients(item, RecipientType.TO, "to"),
        "cc": _recipients(item, RecipientType.CC, "cc"),
        "date": iso_timestamp(getattr(item, "date", None)),
        "message_id": one_line(getattr(item, "messageId", None)),
        "attachments": [one_line(name) for name in names if name and one_line(name)],
    }


def _recipients(item: Any, kind: RecipientType, header: str) -> list[str]:
    """The addresses of an Outlook item's recipients of one kind, else of its ``to``/``cc`` text."""
    recipients = getattr(item, "recipients", None) or []
    found = [one_line(recipient.email) for recipient in recipients if recipient.type == kind]
    return _unique([address for address in found if "@" in address]) or _address_list(getattr(item, header, None))


def _msg_body(item: Any) -> str:
    """An Outlook item's plain body where it has text, else its HTML body as text."""
    body = getattr(item, "body", None) or ""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if body.strip():
        return body.replace("\r\n", "\n")
    html = getattr(item, "htmlBody", None) or b""
    return parse_html(html.decode("utf-8", "replace") if isinstance(html, bytes) else html)[1]


def _address_list(value: Any) -> list[str]:
    """The e-mail addresses in a header value such as ``'Ada <ada@x.org>; bob@y.org'``."""
    if not value:
        return []
    pairs = email.utils.getaddresses([str(value).replace(";", ",")])
    return _unique([address for _, address in pairs if "@" in address])


def _unique(items: list[str]) -> list[str]:
    """``items`` without repeats, in their order."""
    return list(dict.fromkeys(items))


def _message_document(
    message: EmailMessage, doc_id: str, source: str, fmt: str, stem: str, number: int | None = None
) -> Document:
    """The document of one parsed message.

    Raises:
        Rejected: the message is cut short, has neither text nor subject, or its body passes the character limit.
    """
    if any(
        isinstance(defect, errors.CloseBoundaryNotFoundDefect) for part in message.walk() for defect in part.defects
    ):
        raise Rejected("truncated e-mail message (a multipart body never reaches its closing boundary)")
    fields = {
        "subject": one_line(_header(message, "subject")),
        "from": _addresses(message, "from"),
        "to": _addresses(message, "to"),
        "cc": _addresses(message, "cc"),
        "date": _date(message),
        "message_id": one_line(_header(message, "message-id")),
        "attachments": _attachment_names(message),
    }
    return _mail_document(_body(message), fields, source, fmt, stem, doc_id, number)


def _mail_document(
    body: str,
    fields: dict[str, Any],
    source: str,
    fmt: str,
    stem: str,
    doc_id: str | None = None,
    number: int | None = None,
) -> Document:
    """A message's document: ``body`` as text, the subject as title, the non-empty ``fields`` as metadata."""
    built = BoundedText(fmt)
    if number is None:
        built.add(body)
    else:
        built.add(body, message=number)
    metadata = {"source": source, "format": fmt} | {key: value for key, value in fields.items() if value}
    return located_document(built, doc_id or source, fields["subject"], stem, metadata)


def _header(message: EmailMessage, name: str) -> str:
    """A header's value as text; "" when absent or unreadable."""
    try:
        value = message[name]
    except Exception:  # noqa: BLE001 - the email package can fail on a malformed header
        return ""
    return str(value) if value is not None else ""


def _addresses(message: EmailMessage, name: str) -> list[str]:
    """The addresses of an address header (every occurrence), e.g. ``["ada@example.org"]``."""
    try:
        headers = message.get_all(name) or []
        return [address.addr_spec for header in headers for address in header.addresses if address.username]
    except Exception:  # noqa: BLE001 - a malformed header: read it as plain text instead
        return _address_list(", ".join(str(header) for header in message.get_all(name, [])))


def _date(message: EmailMessage) -> str | None:
    """The ``Date`` header in ISO 8601 (UTC when it has a zone); None when absent or unreadable."""
    try:
        header = message["date"]
    except Exception:  # noqa: BLE001 - an unreadable date is no date
        return None
    return iso_timestamp(getattr(header, "datetime", None)) if header is not None else None


def _body(message: EmailMessage) -> str:
    """The message's text: its plain body where that has text, else its HTML body as text, else ""."""
    for preference in ("plain", "html"):
        part = message.get_body(preferencelist=(preference,))
        if part is None:
            continue
        text = _part_text(part)
        if preference == "html":
            text = parse_html(text)[1]
        if text.strip():
            return text
    return ""


def _part_text(part: EmailMessage) -> str:
    """A text part decoded by its charset (UTF-8, replacing errors, when the charset is unknown or wrong)."""
    try:
        content = part.get_content()
        if isinstance(content, str):
            return content
    except (LookupError, UnicodeError, ValueError, AssertionError):
        pass
    payload = part.get_payload(decode=True) or b""
    try:
        return payload.decode(part.get_content_charset() or "utf-8", "replace")
    except LookupError:
        return payload.decode("utf-8", "replace")


def _attachment_names(message: EmailMessage) -> list[str]:
    """The file names of the message's attachments (unnamed ones left out)."""
    try:
        names = [part.get_filename() for part in message.iter_attachments()]
    except Exception:  # noqa: BLE001 - a malformed MIME structure lists no attachments
        return []
    return [one_line(name) for name in names if name and one_line(name)]
