"""The results page writer (``benchmarks.results_page``): rows into a named table of docs/benchmarks.md."""

from __future__ import annotations

import argparse
import datetime
import difflib
import importlib
import re
import types
from pathlib import Path

import pytest

from benchmarks import results_page
from benchmarks.results_page import PAGE, PageError

COLUMNS = ["what", "result", "command", "machine", "date"]

PAGE_TEXT = """\
# Benchmarks

Intro with a | pipe and `code`.

## First

Some prose.

| what | result | command | machine | date |
|---|---|---|---|---|
| alpha | 1 ms | `run a` | box | 2026-01-01 |
| beta | 2 ms | `run b` | box | 2026-01-02 |
| alpha | 1.5 ms | `run a` | box | 2026-01-03 |

| other | columns |
|---|---|
| x | y |

## Second

| what | result | command | machine | date |
|---|---|---|---|---|
| gamma | 3 ms | `run c` | box | 2026-01-04 |

Closing words.
"""


def _row(what: str, result: str) -> dict:
    return {"what": what, "result": result, "command": "`new`", "machine": "m", "date": "2026-12-07"}


def _table_lines(text: str, heading: str, columns=COLUMNS) -> list[str]:
    lines = text.split("\n")
    header, end = results_page.find_table(lines, heading, columns)
    return lines[header + 2 : end]


def _outside_table(text: str, heading: str, columns=COLUMNS) -> tuple[str, str]:
    lines = text.split("\n")
    header, end = results_page.find_table(lines, heading, columns)
    return "\n".join(lines[: header + 2]), "\n".join(lines[end:])


def test_a_key_s_old_rows_give_way_in_place_to_its_new_row():
    new = results_page.update_table(PAGE_TEXT, "First", COLUMNS, ["what"], [_row("alpha", "9 ms")])
    assert _table_lines(new, "First") == [
        "| alpha | 9 ms | `new` | m | 2026-12-07 |",
        "| beta | 2 ms | `run b` | box | 2026-01-02 |",
    ]
    assert _outside_table(new, "First") == _outside_table(PAGE_TEXT, "First")


def test_a_new_key_is_appended_after_the_last_row_and_nothing_else_moves():
    new = results_page.update_table(PAGE_TEXT, "First", COLUMNS, ["what"], [_row("delta", "4 ms")])
    assert _table_lines(new, "First") == _table_lines(PAGE_TEXT, "First") + [
        "| delta | 4 ms | `new` | m | 2026-12-07 |"
    ]
    assert new.replace("| delta | 4 ms | `new` | m | 2026-12-07 |\n", "", 1) == PAGE_TEXT


def test_several_new_rows_of_one_key_replace_its_group():
    rows = [_row("alpha", "7 ms"), _row("alpha", "8 ms"), _row("epsilon", "5 ms")]
    new = results_page.update_table(PAGE_TEXT, "First", COLUMNS, ["what", "command"], rows)
    # the key is (what, command): the old alpha rows had command `run a`, so they stay and the new ones follow
    assert _table_lines(new, "First")[:3] == _table_lines(PAGE_TEXT, "First")
    assert [line.split(" | ")[1] for line in _table_lines(new, "First")[3:]] == ["7 ms", "8 ms", "5 ms"]
    by_what = results_page.update_table(PAGE_TEXT, "First", COLUMNS, ["what"], rows)
    assert [results_page.split_cells(line)[:2] for line in _table_lines(by_what, "First")] == [
        ["alpha", "7 ms"],
        ["alpha", "8 ms"],
        ["beta", "2 ms"],
        ["epsilon", "5 ms"],
    ]


def test_the_same_heading_s_table_is_chosen_by_its_columns_and_other_sections_stay():
    new = results_page.update_table(PAGE_TEXT, "Second", COLUMNS, ["what"], [_row("gamma", "0.3 ms")])
    assert _table_lines(new, "Second") == ["| gamma | 0.3 ms | `new` | m | 2026-12-07 |"]
    assert _table_lines(new, "First") == _table_lines(PAGE_TEXT, "First")
    assert new.endswith("\nClosing words.\n")


def test_cells_are_escaped_and_read_back():
    row = _row("a | b", "line one\nline two")
    new = results_page.update_table(PAGE_TEXT, "Second", COLUMNS, ["what"], [row])
    last = _table_lines(new, "Second")[-1]
    assert last == "| a \\| b | line one line two | `new` | m | 2026-12-07 |"
    assert results_page.split_cells(last)[:2] == ["a \\| b", "line one line two"]
    again = results_page.update_table(new, "Second", COLUMNS, ["what"], [_row("a | b", "2")])
    assert _table_lines(again, "Second")[-1].startswith("| a \\| b | 2 |")
    assert len(_table_lines(again, "Second")) == len(_table_lines(new, "Second"))


def test_crlf_pages_keep_their_line_ends():
    crlf = PAGE_TEXT.replace("\n", "\r\n")
    new = results_page.update_table(crlf, "First", COLUMNS, ["what"], [_row("delta", "4 ms")])
    assert "\n" not in new.replace("\r\n", "")
    assert new.replace("| delta | 4 ms | `new` | m | 2026-12-07 |\r\n", "", 1) == crlf


@pytest.mark.parametrize(
    "heading, columns, message",
    [
        ("Missing", COLUMNS, "no section '## Missing'"),
        ("Second", ["what", "result", "machine", "date"], "its tables' columns: what | result | command"),
        ("First", ["other", "columns", "more"], "no table with the columns other | columns | more"),
    ],
)
def test_a_missing_section_or_table_or_other_columns_is_refused(heading, columns, message):
    row = dict.fromkeys(columns, "v")
    with pytest.raises(PageError, match=re.escape(message)):
        results_page.update_table(PAGE_TEXT, heading, columns, [columns[0]], [row])


def test_ambiguous_pages_and_rows_that_do_not_fit_are_refused():
    twice = PAGE_TEXT.replace("## Second", "## First")
    with pytest.raises(PageError, match="2 section"):
        results_page.update_table(twice, "First", COLUMNS, ["what"], [_row("a", "b")])
    with pytest.raises(PageError, match="are not the table's"):
        results_page.update_table(PAGE_TEXT, "First", COLUMNS, ["what"], [{"what": "a"}])
    with pytest.raises(PageError, match="key columns"):
        results_page.update_table(PAGE_TEXT, "First", COLUMNS, ["nothing"], [_row("a", "b")])
    with pytest.raises(PageError, match="does not have"):
        results_page.complete_rows([{"what": "a", "extra": 1}], COLUMNS, command="c", machine="m", date="d")
    with pytest.raises(PageError, match="lacks the columns"):
        results_page.complete_rows([{"what": "a"}], COLUMNS, command="c", machine="m", date="d")


def test_command_machine_and_date_are_filled_in_where_a_row_leaves_them_out():
    rows = results_page.complete_rows(
        [{"what": "a", "result": "1"}, {"what": "b", "result": "2", "command": "own"}],
        COLUMNS,
        command="python -m x --y",
        machine="box",
        date="2026-12-07",
    )
    assert rows[0] == {
        "what": "a",
        "result": "1",
        "command": "`python -m x --y`",
        "machine": "box",
        "date": "2026-12-07",
    }
    assert rows[1]["command"] == "`own`"


def test_the_date_is_utc():
    new_york = datetime.timezone(datetime.timedelta(hours=-5))
    assert results_page.utc_date(datetime.datetime(2026, 12, 7, 22, 30, tzinfo=new_york)) == "2026-12-08"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", results_page.utc_date())


def test_the_command_line_leaves_out_the_page_options():
    argv = ["--only", "cisi", "--no-record", "--page", "/tmp/x.md", "--page=/tmp/y.md", "--name", "a b"]
    assert (
        results_page.command_line("benchmarks.quality", argv) == "python -m benchmarks.quality --only cisi --name 'a b'"
    )


def _real_cpuinfo() -> str:
    path = Path("/proc/cpuinfo")
    if not path.is_file():
        pytest.skip("no /proc/cpuinfo on this system")
    return path.read_text(encoding="utf-8", errors="replace")


def test_the_machine_cell_names_this_cpu_and_its_flags():
    cpuinfo = _real_cpuinfo()
    name = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.M)
    flags = set(re.search(r"^flags\s*:\s*(.*)$", cpuinfo, re.M).group(1).split())
    described = results_page.describe_machine(cores=3)
    assert described.startswith(" ".join(name.group(1).split()) if name else "")
    named = " ".join(flag for flag in results_page.FLAGS_OF_INTEREST if flag in flags) or "no AVX2"
    assert f", 3 cores, {named}, " in described
    assert re.search(r", \d+ GB of memory$", described)


def test_a_generic_model_name_gets_family_and_model_numbers():
    cpuinfo = _real_cpuinfo()
    family = re.search(r"^cpu family\s*:\s*(\d+)", cpuinfo, re.M)
    model = re.search(r"^model\s*:\s*(\d+)", cpuinfo, re.M)
    if not (family and model):
        pytest.skip("this /proc/cpuinfo names no cpu family and model")
    generic = re.sub(r"^model name\s*:.*$", "model name\t: Intel(R) Xeon(R) CPU @ 2.20GHz", cpuinfo, flags=re.M)
    numbered = re.sub(r"^model name\s*:.*$", "model name\t: AMD EPYC 9B14 96-Core Processor", cpuinfo, flags=re.M)
    assert results_page.describe_machine(generic, "", 2).startswith(
        f"Intel(R) Xeon(R) CPU @ 2.20GHz (family {family.group(1)}, model {model.group(1)}), 2 cores, "
    )
    assert results_page.describe_machine(numbered, "", 1).startswith("AMD EPYC 9B14 96-Core Processor, 1 core, ")


def _args(page: Path, no_record: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    results_page.add_options(parser)
    return parser.parse_args(["--page", str(page)] + (["--no-record"] if no_record else []))


def test_writing_a_copy_of_the_page_round_trips(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_bytes(PAGE.read_bytes())
    original = page.read_text(encoding="utf-8")
    columns = ("what", "result", "command", "machine", "date")
    written = results_page.write_rows(
        page,
        "BM25",
        columns,
        ("what",),
        [{"what": "a new figure", "result": "1 ms"}],
        command="python -m benchmarks.bm25_speed",
    )
    assert written == 1
    after = page.read_text(encoding="utf-8")
    added = [line for line in difflib.ndiff(original.split("\n"), after.split("\n")) if line[:1] in "+-"]
    assert len(added) == 1 and added[0].startswith("+ | a new figure | 1 ms | `python -m benchmarks.bm25_speed` | ")
    cells = results_page.split_cells(added[0][2:])
    assert cells[3] == results_page.describe_machine() and cells[4] == results_page.utc_date()
    results_page.write_rows(
        page,
        "BM25",
        columns,
        ("what",),
        [{"what": "a new figure", "result": "2 ms"}],
        command="python -m benchmarks.bm25_speed",
    )
    assert page.read_text(encoding="utf-8") == after.replace("| a new figure | 1 ms |", "| a new figure | 2 ms |")


def test_a_refused_write_leaves_the_file_as_it_was(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE_TEXT, encoding="utf-8")
    with pytest.raises(PageError):
        results_page.write_rows(
            page,
            "Second",
            ["what", "result"],
            ["what"],
            [{"what": "a", "result": "b"}],
            command="c",
            machine="m",
            date="d",
        )
    assert page.read_text(encoding="utf-8") == PAGE_TEXT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchmarks.md"]
    with pytest.raises(SystemExit, match=re.escape("no table with the columns what | result")):
        results_page.check(_args(page), "Second", ["what", "result"])
    results_page.check(_args(page, no_record=True), "Second", ["what", "result"])  # not recording: no check


def test_no_record_leaves_the_page_alone(tmp_path, capsys):
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE_TEXT, encoding="utf-8")
    results_page.record(
        _args(page, no_record=True), "First", COLUMNS, ["what"], [{"what": "x", "result": "y"}], command="c"
    )
    assert page.read_text(encoding="utf-8") == PAGE_TEXT
    assert "not recorded" in capsys.readouterr().out
    results_page.record(_args(page), "First", COLUMNS, ["what"], [{"what": "x", "result": "y"}], command="c")
    assert _table_lines(page.read_text(encoding="utf-8"), "First")[-1].startswith("| x | y | `c` | ")


#: Every script that writes the page, with the tables it writes (module attributes naming section and columns).
WRITERS = [
    ("benchmarks.quality", "TABLE", "COLUMNS"),
    ("benchmarks.search_ab", "TABLE", "COLUMNS"),
    ("benchmarks.bm25_speed", "TABLE", "COLUMNS"),
    ("benchmarks.evidence", "TABLE", "COLUMNS"),
    ("benchmarks.speed", "TABLE", "COLUMNS"),
    ("benchmarks.index_choice", "TABLE", "COLUMNS"),
    ("benchmarks.tagging", "TABLE", "COLUMNS"),
    ("benchmarks.tagging", "TABLE", "TIMING_COLUMNS"),
    ("benchmarks.ray_scale", "TABLE", "COLUMNS"),
]


@pytest.mark.parametrize("module, table, columns", WRITERS)
def test_each_script_s_table_is_on_the_page(module, table, columns):
    script = importlib.import_module(module)
    lines = PAGE.read_text(encoding="utf-8").split("\n")
    results_page.find_table(lines, getattr(script, table), getattr(script, columns))


def test_a_quality_run_replaces_only_the_rows_it_measured(tmp_path):
    from benchmarks import quality

    run = next(
        r
        for r in quality.load_regressions()["runs"]
        if r["dataset"] == "cisi" and r["mode"] == "dense" and r.get("model") != "adapted"
    )
    result = {metric: value + 0.00004 for metric, value in run["expected"].items()}
    row = quality.table_row(run, result)
    assert (row["dataset"], row["mode"], row["model"]) == ("cisi", "dense", "packaged MiniLM")
    assert [row[c] for c in quality.COLUMNS[3:7]] == [str(round(result[m], 4)) for m in run["expected"]]
    page = tmp_path / "benchmarks.md"
    page.write_bytes(PAGE.read_bytes())
    before = _table_lines(page.read_text(encoding="utf-8"), quality.TABLE, quality.COLUMNS)
    results_page.write_rows(page, quality.TABLE, quality.COLUMNS, quality.KEYS, [row], command="unused")
    after = _table_lines(page.read_text(encoding="utf-8"), quality.TABLE, quality.COLUMNS)
    changed = [i for i, (old, new) in enumerate(zip(before, after)) if old != new]
    assert len(before) == len(after) and len(changed) == 1
    assert results_page.split_cells(after[changed[0]])[:3] == ["cisi", "dense", "packaged MiniLM"]
    assert f"`{run['command']}`" in after[changed[0]]


def _rows_of(page: Path, module, columns_name: str = "COLUMNS") -> list[str]:
    return _table_lines(page.read_text(encoding="utf-8"), module.TABLE, getattr(module, columns_name))


def test_the_scripts_rows_replace_the_rows_the_page_holds_for_them(tmp_path):
    """Each script's key cells are those of the rows already on the page for the same workload, so a rerun
    replaces them rather than adding beside them."""
    from benchmarks import bm25_speed, evidence, ray_scale, tagging

    page = tmp_path / "benchmarks.md"
    page.write_bytes(PAGE.read_bytes())
    args = _args(page)
    timings = {"ranking": (0.1, 0.2), "search": (0.8, 1.0), "search + evidence": (2.0, 3.0)}
    figures = {"hits": 10, "with_evidence": 9, "semantic": 1, "p50_ms": 5.0, "p95_ms": 9.0, "added_p50_ms": 1.0}
    shares = {"accuracy": 0.9, "accuracy_sd": 0.01, "macro_f1": 0.88}
    writes = [
        (bm25_speed, "COLUMNS", bm25_speed.KEYS, bm25_speed.table_rows(5183, 1109, timings)),
        (evidence, "COLUMNS", evidence.KEYS, [evidence.table_row(mode, figures) for mode in evidence.LABELS]),
        (
            ray_scale,
            "COLUMNS",
            ray_scale.KEYS,
            [
                ray_scale.table_row(
                    {"workers": 2, "docs": docs, "ratio": 0.9, "ray_docs_per_s": 9.0, "local_docs_per_s": 10.0}
                )
                for docs in (500, 1500)
            ],
        ),
        (
            tagging,
            "COLUMNS",
            ("examples a corpus",),
            [
                tagging.table_row(
                    {
                        "shots": shots,
                        "seeds": 5,
                        "embedding": shares,
                        "tfidf": shares,
                        "auto": shares,
                        "auto_chose": ["embedding"] * 4 + ["tfidf"],
                    }
                )
                for shots in (4, 8, 32)
            ],
        ),
    ]
    for module, columns, keys, rows in writes:
        before = _rows_of(page, module, columns)
        results_page.record(args, module.TABLE, getattr(module, columns), keys, rows, command="python -m x")
        after = _rows_of(page, module, columns)
        assert len(after) == len(before), module.__name__
        assert sum(old != new for old, new in zip(before, after)) == len(rows), module.__name__
    before = _rows_of(page, tagging, "TIMING_COLUMNS")
    tagging.record(args, [], [], types.SimpleNamespace(documents=9497, seconds=0.8))
    after = _rows_of(page, tagging, "TIMING_COLUMNS")
    assert len(after) == len(before) and sum(old != new for old, new in zip(before, after)) == 1


def test_index_choice_and_speed_replace_their_last_run_whole(tmp_path):
    from benchmarks import index_choice, speed

    page = tmp_path / "benchmarks.md"
    page.write_bytes(PAGE.read_bytes())
    args = argparse.Namespace(rows=1000, queries=10, vectors="clustered", no_hnsw=True, no_record=False, page=page)
    nan = float("nan")
    index_choice.record(
        args, [("flat (exact)", 0.0, "", 1.0, 1.0, nan, nan), ("  nprobe 8", 0.0, "", 0.5, 0.9, nan, nan)]
    )
    index_choice.record(args, [("flat (exact)", 0.0, "", 1.1, 1.0, nan, nan)])
    rows = _rows_of(page, index_choice)
    assert [results_page.split_cells(row)[:7] for row in rows] == [
        ["flat (exact)", "-", "-", "1.10 ms", "1.000", "-", "-"]
    ]
    assert "--rows 1000 --queries 10 --vectors clustered --no-hnsw" in rows[0]
    speed_rows = [("search p50/p99: dense", "1.0 ms / 2.0 ms", "0.30x", "", "target <= 0.4x stock")] * 2
    for _ in range(2):
        results_page.record(
            args,
            speed.TABLE,
            speed.COLUMNS,
            speed.KEYS,
            [dict(zip(speed.COLUMNS, map(str, row))) for row in speed_rows],
            command="python -m s",
        )
    assert len(_rows_of(page, speed)) == 2
