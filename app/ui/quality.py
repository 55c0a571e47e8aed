"""The UI's sidebar panel "Quality on your judgments": the search measured on the collection's judgments,
and what the last ``semsearch learn`` changed.

The figures are ``Collection.evaluate()`` (the collection's default search:
its default mode and its own fusion settings), nDCG@10 and MRR@10 with how
many judged queries and judgments they rest on. They are measured again
only when something they depend on changes: the judgments (their count, and
every judgment given or withdrawn in this UI), the committed generation, or
the collection's search settings; a grade replaced elsewhere, which leaves
the count as it was, shows within ``MEASURED_TTL_S``. The learn summary is
``retriever.judgments.learned.read_learn_report``: when, whether it switched,
cross-validated nDCG@10 before and after, and the settings before and after.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

import streamlit as st

from app.ui.formatting import format_age, model_label
from app.ui.judging import ui_writes
from app.ui.markup import md_escape, plural, stats_html
from retriever import Collection, SemsearchError
from retriever.judgments.learned import read_learn_report

log = logging.getLogger("semsearch.ui")

MEASURED_TTL_S = 600  # the longest a measurement is kept: a grade replaced elsewhere leaves no other trace
SHOWN_METRICS = (("ndcg@10", "nDCG@10"), ("mrr@10", "MRR@10"))
HOW_TO_JUDGE = (
    "No judgments yet. Mark hits with **Answers** or **Does not answer** under each result, or import a file "
    "with `semsearch judge import FILE -c DIR`; this panel then measures the search on them."
)


@st.cache_data(show_spinner="Measuring the search on your judgments…", max_entries=32, ttl=MEASURED_TTL_S)
def measured(path: str, uuid: str, generation: int, judgments_state: tuple, settings_json: str, _col: Collection):
    """``Collection.evaluate()`` of ``_col`` as a dict ``{"metrics", "queries", "judgments", "settings",
    "unanswered"}``.

    Args:
        path, uuid, generation: which collection, at which state (cache key only).
        judgments_state: ``judgments_state(col)`` (cache key only).
        settings_json: the collection's search settings as JSON (cache key only).
        _col: the open collection.

    Raises:
        SemsearchError: the measurement failed.
    """
    evaluation = _col.evaluate()
    return {
        "metrics": dict(evaluation.metrics),
        "queries": evaluation.queries,
        "judgments": evaluation.judgments,
        "settings": dict(evaluation.settings),
        "unanswered": evaluation.unanswered,
    }


def judgments_state(col: Collection) -> tuple[int, int, int]:
    """What the measurement depends on in the judgments, read cheaply: ``(judgments, queries, UI writes)``.

    The UI's writes (``app.ui.judging.ui_writes``, counted in this process) catch a grade changed here, which
    leaves the count as it was.
    """
    count, queries = col.judgment_count()
    return count, queries, ui_writes()


def quality_panel(col: Collection, path: Path, uuid: str, generation: int) -> None:
    """The sidebar panel: the figures on the collection's judgments (or how to give some), then the last learn.

    Args:
        col: the open collection at ``path``, whose manifest has ``uuid``.
        generation: its committed generation (a cache key).
    """
    st.sidebar.divider()
    st.sidebar.subheader("Quality on your judgments")
    try:
        state = judgments_state(col)
        if not state[0]:
            st.sidebar.caption(HOW_TO_JUDGE)
        else:
            settings = json.dumps(col.search_settings(), sort_keys=True, default=str)
            show_figures(measured(str(path), uuid, generation, state, settings, col))
    except SemsearchError as exc:  # e.g. no judged query has a document that answers it
        st.sidebar.caption(f"Not measured: {md_escape(str(exc).rstrip('.'))}.")
    except Exception as exc:  # noqa: BLE001 - the panel must not take the page down
        log.exception("measuring the search on the judgments failed")
        st.sidebar.caption(f"Not measured ({type(exc).__name__}). The server log has the details.")
    show_learn_report(read_learn_report(path))


def show_figures(figures: dict[str, Any]) -> None:
    """nDCG@10 and MRR@10 side by side, then what they rest on and the search measured."""
    columns = st.sidebar.columns(len(SHOWN_METRICS))
    for column, (name, label) in zip(columns, SHOWN_METRICS):
        column.metric(label, f"{figures['metrics'].get(name, 0.0):.3f}")
    st.sidebar.caption(
        f"On {figures['queries']:,} judged {'query' if figures['queries'] == 1 else 'queries'} "
        f"({plural(figures['judgments'], 'judgment')}); the default search: "
        f"{md_escape(settings_label(figures['settings']))}." + left_out(figures.get("unanswered", 0))
    )


def left_out(unanswered: int) -> str:
    """The note on judged queries left out of the figures (all their judgments grade 0); ``""`` for none."""
    if not unanswered:
        return ""
    if unanswered == 1:
        return " 1 more judged query has no document judged to answer it and is left out."
    return f" {unanswered:,} more judged queries have no document judged to answer them and are left out."


def settings_label(settings: dict[str, Any]) -> str:
    """``"hybrid, convex fusion, alpha 0.7, feedback on"``: the parts of ``settings`` that are there."""
    parts = []
    if settings.get("mode"):
        parts.append(str(settings["mode"]))
    if settings.get("fusion"):
        parts.append(f"{settings['fusion']} fusion")
    if isinstance(settings.get("alpha"), (int, float)):
        parts.append(f"alpha {settings['alpha']:g}")
    if isinstance(settings.get("feedback"), bool):
        parts.append(f"feedback {'on' if settings['feedback'] else 'off'}")
    if settings.get("model"):
        parts.append(f"model {model_label(settings['model'])}")
    return ", ".join(parts) or "its defaults"


def show_learn_report(report: dict[str, Any] | None) -> None:
    """What the last ``semsearch learn`` changed, or that it never ran here."""
    st.sidebar.markdown("**Last learn**")
    if report is None:
        st.sidebar.caption("`semsearch learn -c DIR` has not run on this collection.")
        return
    try:
        rows, changes = learn_rows(report), learn_changes(report)
    except (TypeError, ValueError, AttributeError, KeyError):
        st.sidebar.caption("The last learn's report is unreadable.")
        return
    st.sidebar.html(stats_html(rows))
    st.sidebar.caption(md_escape(changes))


def learn_rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """When the learn ran, its outcome and cv nDCG@10 before and after, as ``(label, value, tooltip)`` rows.

    Raises:
        TypeError, ValueError, AttributeError, KeyError: the report is not of the shape ``learn`` writes.
    """
    when = dt.datetime.fromtimestamp(float(report["at"]), dt.timezone.utc).isoformat(timespec="seconds")
    cv = report.get("cv") or {}
    before, after = (cv.get(side, {}).get("ndcg@10") for side in ("before", "after"))
    return [
        ("Learned", format_age(when), when),
        ("Outcome", "switched" if report.get("switched") else "kept what it had", ""),
        ("cv nDCG@10", f"{figure(before)} → {figure(after)}", "cross-validated: measured on queries not learned from"),
    ]


def learn_changes(report: dict[str, Any]) -> str:
    """The settings before → after (and the model, where it changed), the cross-validation and the reason.

    Raises:
        TypeError, ValueError, AttributeError, KeyError: the report is not of the shape ``learn`` writes.
    """
    settings = report.get("settings") or {}
    lines = [f"Settings: {settings_change(settings.get('before') or {}, settings.get('after') or {})}."]
    model = report.get("model") or {}
    if model.get("after") and model.get("after") != model.get("before"):
        lines.append(f"Model: {model_label(model.get('before', ''))} → {model_label(model['after'])}.")
    lines.append(f"{report.get('folds', '?')}-fold cross-validation on {report.get('queries', '?')} judged queries.")
    if report.get("reason"):
        lines.append(str(report["reason"]).rstrip(".") + ".")
    return " ".join(lines)


def figure(value: Any) -> str:
    """A metric as ``"0.412"``, ``"–"`` when absent."""
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


def settings_change(before: dict[str, Any], after: dict[str, Any]) -> str:
    """``"convex fusion → rrf fusion, alpha 0.7 → alpha 0.5"``: each setting that changed; ``"unchanged: ..."``
    when none did."""
    changed = []
    for name in ("fusion", "alpha", "feedback"):
        old, new = settings_label({name: before.get(name)}), settings_label({name: after.get(name)})
        if name in after and old != new:
            changed.append(f"{old} → {new}")
    return ", ".join(changed) if changed else f"unchanged: {settings_label(before)}"
