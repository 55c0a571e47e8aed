"""The soak run's journals, and what they say the collection must hold afterwards.

Each writer process appends to its own journal, one JSON line per event,
with an unbuffered ``write`` (a SIGKILL loses nothing already written):
``{"intent": SEQ, "op": ..., "docs": {id: version or null}}`` before it asks
for a write, and ``{"ack": SEQ}`` once the write returned (the API call
returned, or the server answered 2xx). ``null`` is a deletion.

A writer runs one write at a time, so for each id the events are ordered.
After the last acknowledged event for an id, only writes that were never
acknowledged (the writer or the server was killed during them) can have
changed it; so the id must hold the state of its last acknowledged event,
or that of one of the unacknowledged events after it. Anything else is an
acknowledged write lost.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping


class Journal:
    """An append-only journal of one writer (``path``), surviving its writer's SIGKILL."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, event: dict) -> None:
        os.write(self.fd, (json.dumps(event, separators=(",", ":")) + "\n").encode())

    def close(self) -> None:
        os.close(self.fd)


def read_events(path: str | os.PathLike) -> list[dict]:
    """The journal's events; a last line cut by a kill is dropped."""
    events = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # the line being written when the writer was killed
    return events


@dataclass
class Verdict:
    """What the journals' writes became."""

    writes: int = 0  # write requests made
    acknowledged: int = 0  # of those, acknowledged
    acknowledged_docs: int = 0  # document changes acknowledged (one per id per write)
    uncertain: int = 0  # writes cut by a kill: they may or may not have landed
    ids: int = 0  # ids ever written
    found: int = 0  # ids whose stored state is one the journals allow
    lost: list[dict] = field(default_factory=list)  # ids whose stored state no journal allows

    def to_dict(self) -> dict:
        return {
            "writes": self.writes,
            "acknowledged": self.acknowledged,
            "acknowledged_docs": self.acknowledged_docs,
            "uncertain": self.uncertain,
            "ids": self.ids,
            "found": self.found,
            "lost": len(self.lost),
            "lost_examples": self.lost[:10],
        }


def allowed_states(events: Iterable[dict]) -> tuple[dict[str, set], Verdict]:
    """For each id, the versions it may hold (None: absent), from one or more journals' events in order."""
    verdict = Verdict()
    history: dict[str, list[tuple[object, bool]]] = {}
    events = list(events)
    acked = {e["ack"] for e in events if "ack" in e}
    for event in events:
        if "intent" not in event:
            continue
        verdict.writes += 1
        done = event["intent"] in acked
        verdict.acknowledged += done
        verdict.uncertain += not done
        for doc_id, version in event["docs"].items():
            history.setdefault(doc_id, []).append((version, done))
            verdict.acknowledged_docs += done
    allowed: dict[str, set] = {}
    for doc_id, changes in history.items():
        last_acked = max((i for i, (_, done) in enumerate(changes) if done), default=None)
        start = 0 if last_acked is None else last_acked + 1
        states = {None} if last_acked is None else {changes[last_acked][0]}
        states |= {version for version, done in changes[start:] if not done}
        allowed[doc_id] = states
    verdict.ids = len(allowed)
    return allowed, verdict


def verify(journals: Iterable[str | os.PathLike], stored: Mapping[str, object]) -> Verdict:
    """Check ``stored`` (``{id: version}`` of every document now in the collection) against the journals.

    Each journal's ids must be its own (writers never share an id), so events are ordered within one journal.
    """
    events: list[dict] = []
    for number, path in enumerate(journals):
        for event in read_events(path):  # sequence numbers are per journal: make them distinct
            if "intent" in event:
                event = {**event, "intent": (number, event["intent"])}
            elif "ack" in event:
                event = {"ack": (number, event["ack"])}
            events.append(event)
    allowed, verdict = allowed_states(events)
    for doc_id, states in allowed.items():
        now = stored.get(doc_id)
        if now in states:
            verdict.found += 1
        else:
            verdict.lost.append({"id": doc_id, "stored": now, "allowed": sorted(map(str, states))})
    return verdict
