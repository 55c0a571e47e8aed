"""What a judgment is: a query, a document id and a grade, with who gave it and when; and what many make.

``Judgment`` is one; ``make_judgment`` checks a record given by a user (a
``Judgment`` or a dict ``{"query", "id", "grade"}``) and says which field is
wrong. ``JudgedSet`` is every judgment of a collection in the shape
``retriever.evaluation`` (trec_eval) reads; ``JudgmentImport`` is the report of
storing many.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable

from retriever.errors import BadInputError
from retriever.unicode_policy import check_utf8

MAX_QUERY_CHARS = 2000
MAX_ID_CHARS = 1024  # the catalog's id column
MAX_WHO_CHARS = 256
GRADES = (0, 1, 2, 3)  # 0: does not answer; 1..3: answers, higher is better
DEFAULT_GRADE = 1


@dataclass(frozen=True)
class Judgment:
    """One judgment: whether (and how well) document ``doc_id`` answers ``query``.

    Attributes:
        query: The query text, stripped of surrounding whitespace; non-empty, at most 2,000 characters.
        doc_id: A document id of the collection.
        grade: 0 (does not answer) or 1, 2, 3 (answers; higher is better).
        who: Who judged (an API key's name, the UI's user, the OS user for the CLI); may be empty.
        at: When, Unix seconds (0: set to the time it is stored).
    """

    query: str
    doc_id: str
    grade: int = DEFAULT_GRADE
    who: str = ""
    at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """``{"query", "id", "grade", "who", "at"}``."""
        return {"query": self.query, "id": self.doc_id, "grade": self.grade, "who": self.who, "at": self.at}


def query_key(query: str) -> str:
    """The stable id of a query text: ``"q"`` and the first 16 hex digits of the SHA-256 of its stripped text."""
    return "q" + hashlib.sha256(query.strip().encode("utf-8")).hexdigest()[:16]


def check_grade(grade: Any) -> int:
    """``grade`` if it is one of the integers 0..3 (a bool is refused).

    Raises:
        BadInputError: Any other value.
    """
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADES:
        raise BadInputError(f"grade must be one of the integers 0, 1, 2, 3, got {_shown(grade)}")
    return int(grade)


def check_query_text(query: Any) -> str:
    """``query`` stripped, if it is a non-empty UTF-8 string of at most 2,000 characters.

    Raises:
        BadInputError: Any other value.
    """
    if not isinstance(query, str):
        raise BadInputError(f"query must be a string, got {type(query).__name__}")
    check_utf8(query, "query")
    text = query.strip()
    if not text:
        raise BadInputError("query must not be empty")
    if len(text) > MAX_QUERY_CHARS:
        raise BadInputError(f"query is {len(text)} characters long; at most {MAX_QUERY_CHARS} are kept")
    return text


def check_doc_id(doc_id: Any) -> str:
    """``doc_id`` if it is a non-empty UTF-8 string of at most 1,024 characters.

    Raises:
        BadInputError: Any other value.
    """
    if not isinstance(doc_id, str):
        raise BadInputError(f"id must be a string, got {type(doc_id).__name__}")
    check_utf8(doc_id, "id")
    if not doc_id:
        raise BadInputError("id must not be empty")
    if len(doc_id) > MAX_ID_CHARS:
        raise BadInputError(f"id is {len(doc_id)} characters long; ids have at most {MAX_ID_CHARS}")
    return doc_id


def check_who(who: Any) -> str:
    """``who`` if it is a UTF-8 string of at most 256 characters (may be empty).

    Raises:
        BadInputError: Any other value.
    """
    if not isinstance(who, str):
        raise BadInputError(f"who must be a string, got {type(who).__name__}")
    check_utf8(who, "who")
    if len(who) > MAX_WHO_CHARS:
        raise BadInputError(f"who is {len(who)} characters long; at most {MAX_WHO_CHARS} are kept")
    return who


def make_judgment(query: Any, doc_id: Any, grade: Any = DEFAULT_GRADE, who: Any = "", at: Any = 0.0) -> Judgment:
    """A checked ``Judgment`` (query stripped).

    Raises:
        BadInputError: A field is wrong; the message names it.
    """
    if isinstance(at, bool) or not isinstance(at, (int, float)) or at < 0:
        raise BadInputError(f"at must be Unix seconds (a number of at least 0), got {_shown(at)}")
    return Judgment(check_query_text(query), check_doc_id(doc_id), check_grade(grade), check_who(who), float(at))


def judgment_from(record: Any, who: str = "") -> Judgment:
    """A checked ``Judgment`` from a ``Judgment`` or a dict ``{"query", "id", "grade"}`` (grade optional: 1).

    A dict may carry ``who`` and ``at`` too; otherwise (and for a ``Judgment`` whose ``who`` is empty) ``who``
    is the one given here.

    Raises:
        BadInputError: Not a record, a field missing or wrong; the message names it.
    """
    if isinstance(record, Judgment):
        return make_judgment(record.query, record.doc_id, record.grade, record.who or who, record.at)
    if not isinstance(record, dict):
        raise BadInputError(f"a judgment is an object with query, id and grade, got {type(record).__name__}")
    missing = [name for name in ("query", "id") if name not in record]
    if missing:
        raise BadInputError(f"missing {' and '.join(missing)}")
    unknown = sorted(set(record) - {"query", "id", "grade", "who", "at"})
    if unknown:
        raise BadInputError(f"unknown field(s) {', '.join(map(repr, unknown))}; a judgment has query, id and grade")
    return make_judgment(
        record["query"],
        record["id"],
        record.get("grade", DEFAULT_GRADE),
        record.get("who") or who,
        record.get("at", 0.0),
    )


@dataclass
class JudgedSet:
    """Judgments in the shape evaluation reads.

    Attributes:
        queries: ``{query_key: query text}``.
        qrels: ``{query_key: {doc id: grade}}`` (trec_eval's shape; grade 0 kept).
    """

    queries: dict[str, str] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    def __len__(self) -> int:
        """The number of queries."""
        return len(self.queries)

    @property
    def judgments(self) -> int:
        """The number of (query, document) judgments."""
        return sum(len(docs) for docs in self.qrels.values())

    def subset(self, keys: Iterable[str]) -> "JudgedSet":
        """The queries of ``keys`` (query keys; unknown ones are skipped), in the order given."""
        chosen = [key for key in dict.fromkeys(keys) if key in self.queries]
        return JudgedSet(
            {key: self.queries[key] for key in chosen}, {key: dict(self.qrels.get(key, {})) for key in chosen}
        )

    @classmethod
    def of(cls, judgments: Iterable[Judgment]) -> "JudgedSet":
        """The set of ``judgments`` (a later judgment of the same query and document wins)."""
        judged = cls()
        for item in judgments:
            key = query_key(item.query)
            judged.queries.setdefault(key, item.query)
            judged.qrels.setdefault(key, {})[item.doc_id] = item.grade
        return judged


@dataclass
class JudgmentImport:
    """The report of storing many judgments.

    Attributes:
        stored: New judgments.
        replaced: (query, id) pairs that had one already: its grade, who and at were replaced.
        unknown: ``(line or position, doc id)`` of judgments naming no document of the collection: not stored.
        queries: Distinct queries among the stored and replaced.
        dry_run: Whether nothing was written (the counts say what would have been).
    """

    stored: int = 0
    replaced: int = 0
    unknown: list[tuple[int, str]] = field(default_factory=list)
    queries: int = 0
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """``{"stored", "replaced", "unknown": [{"line", "id"}], "queries", "dry_run"}``."""
        return {
            "stored": self.stored,
            "replaced": self.replaced,
            "unknown": [{"line": line, "id": doc_id} for line, doc_id in self.unknown],
            "queries": self.queries,
            "dry_run": self.dry_run,
        }


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
