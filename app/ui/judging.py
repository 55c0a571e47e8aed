"""The UI's judgment controls: on a hit, or on the document view, say whether the document answers the query.

Two small buttons, "Answers" (grade 1) and "Does not answer" (grade 0),
store ``Collection.judge(query, doc_id, grade, who=...)``; the judgment
already given for that (query, document) shows as the pressed (primary)
button, and pressing it again withdraws it (``Collection.remove_judgments``).
A result list reads its query's judgments once (``QueryJudgments.load``),
not once per hit. Judgments do not change the collection's generation, so
they are read fresh on every run rather than cached.

A judgment that cannot be stored (a deleted document, a read-only
collection) leaves a one-line message beside the controls it came from,
shown on the run that follows and then forgotten.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

import streamlit as st

from app.ui.markup import md_escape
from retriever import Collection, SemsearchError

log = logging.getLogger("semsearch.ui")

ANSWERS, DOES_NOT_ANSWER = 1, 0
NOTICE = "ss-judgment-notice"  # session state: (query, doc_id, message) of the last judgment that failed
DEFAULT_WHO = "ui"  # who judged, when the page knows no user's name

_writes = [0]  # judgments stored or withdrawn by this process's sessions (a cache key of the quality panel)
_writes_lock = threading.Lock()


def ui_writes() -> int:
    """How many judgments this process's UI sessions have stored or withdrawn so far."""
    return _writes[0]


def who_judges() -> str:
    """Who a judgment from this browser session is by: the signed-in user's e-mail or name where the host
    platform signs users in (``st.user``), else ``"ui"`` (the UI's own password names no one)."""
    try:
        user = st.user
        if user.get("is_logged_in"):
            for claim in ("email", "name"):
                value = user.get(claim)
                if isinstance(value, str) and value.strip():
                    return value.strip()[:256]
    except Exception:  # noqa: BLE001 - no user information in this Streamlit run
        pass
    return DEFAULT_WHO


def grade_label(grade: int) -> str:
    """``"answers"`` (with the grade when above 1) or ``"does not answer"``."""
    if grade <= DOES_NOT_ANSWER:
        return "does not answer"
    return "answers" if grade == ANSWERS else f"answers (grade {grade})"


@dataclass
class QueryJudgments:
    """The judgments already given for one query, and the controls that give, change or withdraw them.

    Attributes:
        col: The open collection.
        query: The query text, stripped.
        given: Document id -> grade of the judgments stored for ``query``.
        notice: ``(doc_id, message)`` of a judgment of ``query`` that failed on the last click, or None.
    """

    col: Collection
    query: str
    given: dict[str, int] = field(default_factory=dict)
    notice: tuple[str, str] | None = None

    @classmethod
    def load(cls, col: Collection, query: str, doc_id: str | None = None) -> QueryJudgments:
        """Read the judgments of ``query`` (only ``doc_id``'s when given) in one call, and take the last
        click's failure. When they cannot be read, a caption says so and none show as given.

        Args:
            col: The open collection.
            query: The query text (stripped here).
            doc_id: One document (the document view), or None for every document (a result list).
        """
        query = query.strip()
        notice = st.session_state.pop(NOTICE, None)
        found = cls(col, query, notice=(notice[1], notice[2]) if notice and notice[0] == query else None)
        try:
            for judgment in col.judgments(query=query, doc_id=doc_id):
                found.given.setdefault(judgment.doc_id, judgment.grade)  # newest first: keep the newest
        except SemsearchError as exc:
            st.caption(f"The judgments given so far could not be read: {md_escape(exc)}")
        return found

    def controls(self, doc_id: str, key: str) -> None:
        """The two buttons for ``doc_id``, the given one pressed (primary); pressing it again withdraws it.

        Args:
            doc_id: The document judged.
            key: Unique among the page's controls (the card's rank, or ``"document"``).
        """
        given = self.given.get(doc_id)
        for grade, label, icon in (
            (ANSWERS, "Answers", ":material/thumb_up:"),
            (DOES_NOT_ANSWER, "Does not answer", ":material/thumb_down:"),
        ):
            pressed = given is not None and (given >= ANSWERS) == (grade == ANSWERS)
            st.button(
                label,
                key=f"judge-{grade}-{key}",
                icon=icon,
                type="primary" if pressed else "tertiary",
                help=self._help(pressed, given, grade),
                on_click=record_judgment,
                args=(self.col, self.query, doc_id, grade, given),
            )

    def _help(self, pressed: bool, given: int | None, grade: int) -> str:
        if pressed and given is not None:
            return f"Judged: {grade_label(given)}. Press again to withdraw the judgment."
        said = "answers" if grade == ANSWERS else "does not answer"
        return f"Judge that this document {said} the query “{md_escape(self.query)}”."

    def show_notice(self, doc_id: str) -> None:
        """The one-line message of the last click on ``doc_id``'s controls, when it failed."""
        if self.notice is not None and self.notice[0] == doc_id:
            st.warning(md_escape(self.notice[1]), icon=":material/error:")

    def show_stray_notice(self, shown: list[str]) -> None:
        """The message of a failed click on a document no longer among ``shown`` (e.g. deleted meanwhile)."""
        if self.notice is not None and self.notice[0] not in shown:
            self.show_notice(self.notice[0])


def record_judgment(col: Collection, query: str, doc_id: str, grade: int, given: int | None) -> None:
    """Button callback: store that ``doc_id`` answers ``query`` (``grade`` 1) or not (0); withdraw the
    judgment instead when the button pressed is the one already given. A failure becomes the notice."""
    withdraw = given is not None and (given >= ANSWERS) == (grade == ANSWERS)
    failed = "The judgment was not " + ("withdrawn" if withdraw else "stored")
    try:
        if withdraw:
            col.remove_judgments(query, doc_id=doc_id)
        else:
            col.judge(query, doc_id, grade, who=who_judges())
    except SemsearchError as exc:
        st.session_state[NOTICE] = (query, doc_id, f"{failed}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a click must not show a traceback
        log.exception("a judgment failed")
        st.session_state[NOTICE] = (query, doc_id, f"{failed} ({type(exc).__name__}).")
    else:
        with _writes_lock:
            _writes[0] += 1
