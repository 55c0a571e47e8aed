"""E-mail: message files, mailboxes (streamed, a document or error per message) and Outlook messages."""

from __future__ import annotations

import datetime as dt
import mailbox
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

from indexer.loaders import mail
from indexer.loaders.common import LoadError
from indexer.loaders.mail import read_eml, read_mbox, read_msg
from tests.indexer.made_files import cut_in_half, located, rejected

OUTLOOK = Path(__file__).parent / "data" / "outlook"
SENT = dt.datetime(2024, 3, 5, 10, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))


def message(
    subject: str = "Delta survey",
    body: str | None = "The silt moved south.\nFrom the boat we saw it.\n",
    html: str | None = None,
    attachment: str | None = "notes.pdf",
) -> EmailMessage:
    made = EmailMessage()
    made["From"] = "Ada Lovelace <ada@example.org>"
    made["To"] = "Bob <bob@example.org>, carol@example.org"
    made["Cc"] = "dan@example.org"
    if subject:
        made["Subject"] = subject
    made["Date"] = format_datetime(SENT)
    made["Message-ID"] = "<survey-1@example.org>"
    if body is not None:
        made.set_content(body)
        if html is not None:
            made.add_alternative(html, subtype="html")
    elif html is not None:
        made.set_content(html, subtype="html")
    if attachment:
        made.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename=attachment)
    return made


def write_eml(path: Path, made: EmailMessage) -> Path:
    path.write_bytes(bytes(made))
    return path


def write_mbox(path: Path, messages: list[EmailMessage]) -> Path:
    box = mailbox.mbox(path)
    for made in messages:
        box.add(made)
    box.flush()
    box.close()
    return path


# --- eml --------------------------------------------------------------------------


def test_eml_plain_body_and_headers_as_metadata(tmp_path):
    path = write_eml(tmp_path / "survey.eml", message())
    (document,) = read_eml(path, str(path), "survey")
    assert document.id == str(path)
    assert document.title == "Delta survey"
    assert document.text == "The silt moved south.\nFrom the boat we saw it."
    assert document.metadata == {
        "source": str(path),
        "format": "eml",
        "subject": "Delta survey",
        "from": ["ada@example.org"],
        "to": ["bob@example.org", "carol@example.org"],
        "cc": ["dan@example.org"],
        "date": "2024-03-05T08:30:00+00:00",
        "message_id": "<survey-1@example.org>",
        "attachments": ["notes.pdf"],
    }


def test_eml_prefers_plain_text_and_falls_back_to_html(tmp_path):
    both = write_eml(tmp_path / "both.eml", message(body="plain words\n", html="<p>html words</p>"))
    html_only = write_eml(tmp_path / "html.eml", message(body=None, html="<h1>Report</h1><p>Water <b>rose</b>.</p>"))
    blank_plain = write_eml(tmp_path / "blank.eml", message(body="  \n", html="<p>only the html has text</p>"))
    assert next(read_eml(both, "b", "b")).text == "plain words"
    assert next(read_eml(html_only, "h", "h")).text == "Report\n\nWater rose."
    assert next(read_eml(blank_plain, "p", "p")).text == "only the html has text"


def test_eml_with_an_unknown_charset_is_still_read(tmp_path):
    made = message(attachment=None)
    made.set_content("caf\xe9 au lait\n".encode("latin-1"), maintype="text", subtype="plain", cte="8bit")
    made.replace_header("Content-Type", 'text/plain; charset="x-no-such-charset"')
    (document,) = read_eml(write_eml(tmp_path / "odd.eml", made), "odd", "odd")
    assert document.text.startswith("caf") and document.text.endswith("au lait")


def test_eml_with_a_subject_and_no_body_keeps_its_subject(tmp_path):
    path = write_eml(tmp_path / "note.eml", message(subject="Call me", body="", attachment=None))
    (document,) = read_eml(path, str(path), "note")
    assert (document.title, document.text) == ("Call me", "")


def test_eml_refusals(tmp_path):
    headless = tmp_path / "plain.eml"
    headless.write_text("just a note without any header lines\n", encoding="utf-8")
    assert rejected(read_eml, headless).startswith("not an e-mail message")
    empty = write_eml(tmp_path / "empty.eml", message(subject="", body="", attachment=None))
    assert rejected(read_eml, empty) == "no text"
    whole = write_eml(tmp_path / "whole.eml", message(body="words " * 200, attachment="big.pdf"))
    assert rejected(read_eml, cut_in_half(whole, tmp_path)).startswith("truncated e-mail message")


# --- mbox -------------------------------------------------------------------------


def test_mbox_gives_a_document_per_message_numbered_from_one(tmp_path):
    path = write_mbox(tmp_path / "inbox.mbox", [message(f"Survey {n}") for n in (1, 2, 3)])
    documents = list(read_mbox(path, str(path), "inbox"))
    assert [d.id for d in documents] == [f"{path}#1", f"{path}#2", f"{path}#3"]
    assert [d.title for d in documents] == ["Survey 1", "Survey 2", "Survey 3"]
    assert located(documents[1], "silt moved") == {"message": 2}
    assert documents[0].text == "The silt moved south.\nFrom the boat we saw it."  # ">From" escaping undone
    assert all(d.metadata["source"] == str(path) and d.metadata["format"] == "mbox" for d in documents)


def test_mbox_bad_messages_are_errors_and_the_rest_load(tmp_path, monkeypatch):
    messages = [message("small"), message("big", body="x" * 5000), message("", body="", attachment=None)]
    path = write_mbox(tmp_path / "inbox.mbox", [*messages, message("last")])
    monkeypatch.setattr(mail, "MAX_MESSAGE_BYTES", 3000)
    items = list(read_mbox(path, "box", "inbox"))
    assert [type(item).__name__ for item in items] == ["Document", "LoadError", "LoadError", "Document"]
    assert items[1] == LoadError("box#2", "message is over the 3000 byte limit")
    assert items[2] == LoadError("box#3", "no text")
    assert items[3].id == "box#4" and items[3].title == "last"


def test_mbox_is_read_as_it_is_iterated(tmp_path):
    """Messages come one at a time: one appended after the first was taken is still read."""
    path = write_mbox(tmp_path / "inbox.mbox", [message("first"), message("second")])
    documents = read_mbox(path, "box", "inbox")
    assert next(documents).title == "first"
    write_mbox(path, [message("third")])  # mailbox.mbox appends
    assert [d.title for d in documents] == ["second", "third"]


def test_not_a_mailbox_and_an_empty_one_are_refused(tmp_path):
    text = tmp_path / "notes.mbox"
    text.write_text("Dear diary\n\nFrom today on I write.\n", encoding="utf-8")
    assert rejected(read_mbox, text) == "not an mbox mailbox (its first line is not a 'From ' line)"
    blank = tmp_path / "blank.mbox"
    blank.write_text("\n\n", encoding="utf-8")
    assert rejected(read_mbox, blank) == "no messages in the mailbox"


# --- msg --------------------------------------------------------------------------


def test_msg_headers_body_and_attachment_names():
    path = OUTLOOK / "attachments.msg"
    (document,) = read_msg(path, str(path), "attachments")
    assert document.title == "attachmentFiles"
    assert document.text == "attachmentFiles"
    assert document.metadata["format"] == "msg"
    assert document.metadata["from"] == ["hmailuser@hmailserver.test"]
    assert document.metadata["to"] == ["hmailuser@hmailserver.test"]
    assert document.metadata["date"] == "2023-11-01T00:48:31+00:00"
    assert document.metadata["message_id"] == "<000001da0c5d$22ab1460$68013d20$@hmailserver.test>"
    assert document.metadata["attachments"] == ["jpg.jpg", "png.png", "tif.tif"]


def test_msg_recipients_by_kind():
    path = OUTLOOK / "recipients.msg"
    (document,) = read_msg(path, str(path), "recipients")
    assert (document.title, document.text) == ("title", "body")
    assert document.metadata["to"] == ["to@example.com"]
    assert document.metadata["cc"] == ["cc@example.com"]


def test_msg_cut_in_half_is_refused(tmp_path):
    half = cut_in_half(OUTLOOK / "attachments.msg", tmp_path)
    assert rejected(read_msg, half).startswith("corrupt or truncated msg file")
