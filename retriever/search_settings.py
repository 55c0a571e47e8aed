"""The hybrid settings a collection searches with when a caller sets none: fusion, alpha and feedback.

They are the built-in defaults (``retriever.search.fusion``: convex fusion,
alpha 0.7, feedback on) until ``semsearch learn`` chooses others from the
collection's judgments; the choice is kept in the manifest's ``search``
entry, written under the collection's lock, and every process searching the
collection reads it again when the manifest file changes. A caller's own
``fusion``, ``alpha`` or ``feedback`` always wins over the collection's.
"""

from __future__ import annotations

from typing import Any, Mapping

from retriever.errors import BadInputError
from retriever.search.fusion import DEFAULT_ALPHA, DEFAULT_FUSION, FUSIONS

SETTINGS = ("fusion", "alpha", "feedback")
BUILT_IN: dict[str, Any] = {"fusion": DEFAULT_FUSION, "alpha": DEFAULT_ALPHA, "feedback": True}


def settings_in(manifest_search: Mapping[str, Any] | None) -> dict[str, Any]:
    """The settings a manifest's ``search`` entry names, the built-in ones for what it leaves out.

    Returns:
        ``{"fusion": str, "alpha": float, "feedback": bool}``.
    """
    chosen = dict(BUILT_IN)
    chosen.update({name: value for name, value in (manifest_search or {}).items() if name in SETTINGS})
    return chosen


def checked_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` as a manifest keeps them: only known names, each checked.

    Raises:
        BadInputError: An unknown name, a fusion that is none of ``FUSIONS``, an alpha outside [0, 1], or a
            feedback that is not a bool.
    """
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise BadInputError(f"unknown search setting(s) {', '.join(unknown)}; the settings are {', '.join(SETTINGS)}")
    chosen = settings_in(settings)
    if chosen["fusion"] not in FUSIONS:
        raise BadInputError(f"unknown fusion {chosen['fusion']!r}; use one of {', '.join(FUSIONS)}")
    alpha = chosen["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha <= 1.0:
        raise BadInputError(f"alpha must be a number from 0 to 1, got {alpha!r}")
    if not isinstance(chosen["feedback"], bool):
        raise BadInputError(f"feedback must be True or False, got {chosen['feedback']!r}")
    return {"fusion": chosen["fusion"], "alpha": float(alpha), "feedback": chosen["feedback"]}
