"""The table ``benchmarks.scale`` prints: a row per size and state, its segments and hybrid phases."""

from __future__ import annotations

import statistics
from collections import defaultdict

STATES = ("incremental", "compacted")


def print_rows(sizes: dict) -> None:
    """A row per size and state measured (searches | costs), each followed by its segments and hybrid phases."""
    print(
        f"{'documents':>10} {'state':<11} {'chunks':>10} {'dense p50':>9} {'p99':>7} {'R@10':>5} {'hybrid':>7} "
        f"{'bm25':>7} {'1% filt':>7} {'hits':>4} | {'commit':>7} {'compact':>8} {'private':>8} {'file':>8} "
        f"{'resident':>9} {'raw':>8} {'disk':>8}"
    )
    for n, row in sizes.items():
        for state in (state for state in STATES if state in row):
            s = row[state]
            commit = statistics.median(c["seconds"] for c in s["commits"]) * 1000
            compact = f"{s['compact_s']:.1f} s" if "compact_s" in s else "-"
            memory, dense = s["reader"]["searched"], s["dense"]
            print(
                f"{int(n):>10,} {state:<11} {s['chunks']:>10,} {dense['p50_ms']:>6.2f} ms {dense['p99_ms']:>7.2f} "
                f"{dense['recall_at_10']:>5.3f} {s['hybrid']['p50_ms']:>7.2f} {s['bm25']['p50_ms']:>7.2f} "
                f"{s['filtered_1pct']['p50_ms']:>7.2f} {s['filtered_1pct']['min_hits']:>4} | {commit:>4.0f} ms "
                f"{compact:>8} {_mb(memory['private_bytes'])} {_mb(memory['file_bytes'])} "
                f" {_mb(s['resident_index_bytes'])} {_mb(s['raw_vector_bytes'])} {_mb(s['disk_bytes'])}"
            )
            phases = ", ".join(f"{k} {v:.2f}" for k, v in s["hybrid"]["phases_p50_ms"].items())
            one_thread = s["hybrid"].get("one_thread", {}).get("p50_ms", float("nan"))
            print(
                f"{'':>22} segments: {_segments(s['segments'])}; int8 rows {_mb(s.get('int8_bytes', 0)).strip()}; "
                f"hybrid phases p50 ms: {phases}; hybrid on one thread p50 {one_thread:.2f} ms"
            )


def _mb(n: int) -> str:
    return f"{n / 1e6:>5.0f} MB"


def _segments(segments: list[dict]) -> str:
    """``"3 flat (60,000 chunks), 1 ivf-rabitq nlist 256 nprobe 8 (40,000 chunks)"``."""
    groups: dict[str, list[int]] = defaultdict(list)
    for s in segments:
        settings = "".join(f" {k} {s[k]}" for k in ("nlist", "nprobe", "rescore") if k in s)
        groups[f"{s['type']}{settings}"].append(s["chunks"])
    return ", ".join(f"{len(chunks)} {kind} ({sum(chunks):,} chunks)" for kind, chunks in groups.items())
