"""Benchmark results as rows of docs/benchmarks.md: the machine in one cell, and rows written into a named table.

docs/benchmarks.md keeps every result as a row of a Markdown table under a
``## `` section, each row with the command that measured it, the machine and
the date. A benchmark script puts its rows into its table with ``record``:

- the table is found by its section's heading and its header's columns;
  a page without that section or table, or whose header names other columns,
  is refused (``PageError``) and left as it is;
- new rows are matched to old ones by the key columns: the old rows of a key
  give way, in place, to the new rows of that key (one or several), and new
  rows of a key the table does not hold go after its last row;
- the ``command``, ``machine`` (``describe_machine``) and ``date`` (UTC,
  ``YYYY-MM-DD``) columns are filled in where a row leaves them out;
- every other byte of the page stays as it was, and the page is replaced
  whole (written beside it, then renamed over it) or not at all.

``update_table`` and ``describe_machine`` are pure functions over text;
``write_rows`` is the thin part that reads and writes the file. Scripts add
``--no-record`` (a run that must not touch the page: a smoke run) and
``--page`` (another copy of the page) with ``add_options``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import re
import shlex
from pathlib import Path
from typing import Iterator, Mapping, Sequence

PAGE = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
#: The instruction-set flags that decide how fast encoders and FAISS run, in the order they are named.
FLAGS_OF_INTEREST = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "avx_vnni")
COMMAND, MACHINE, DATE = "command", "machine", "date"

_SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_CELL_BORDER = re.compile(r"(?<!\\)\|")
_CLOCK = re.compile(r"@\s*[\d.]+\s*[GM]Hz", re.I)


class PageError(ValueError):
    """The page does not hold the table a script writes (section or header missing, or other columns)."""


def parse_cpuinfo(text: str) -> dict:
    """The first processor of ``/proc/cpuinfo``'s text: ``{"model": name, "family", "model_number", "flags"}``.

    ``model`` is ``""`` where the text names none; ``family`` and ``model_number`` are strings (``""``
    where absent); ``flags`` the set of every flag listed.
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:  # a blank line ends the first processor's block
                break
            continue
        key, colon, value = line.partition(":")
        if colon and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    return {
        "model": " ".join(fields.get("model name", "").split()),
        "family": fields.get("cpu family", ""),
        "model_number": fields.get("model", ""),
        "flags": set(fields.get("flags", "").split()),
    }


def memory_bytes(meminfo: str) -> int | None:
    """``MemTotal`` of ``/proc/meminfo``'s text in bytes, or ``None`` where it is not there."""
    match = re.search(r"^MemTotal:\s*(\d+)\s*kB", meminfo, re.M)
    return int(match.group(1)) * 1024 if match else None


def describe_machine(cpuinfo: str | None = None, meminfo: str | None = None, cores: int | None = None) -> str:
    """This machine in one table cell: CPU model, cores, the flags of interest, memory.

    ``"AMD EPYC (family 23, model 1), 2 cores, avx2, 24 GB of memory"``: the
    family and model numbers follow a model name that carries no model number
    of its own; the flags are those of ``FLAGS_OF_INTEREST`` the CPU has
    (``no AVX2`` where it has none). ``cpuinfo`` and ``meminfo`` default to
    ``/proc/cpuinfo`` and ``/proc/meminfo`` (left out where unreadable),
    ``cores`` to the cores this process may run on.
    """
    cpu = parse_cpuinfo(_read(Path("/proc/cpuinfo")) if cpuinfo is None else cpuinfo)
    name = cpu["model"] or platform.processor() or platform.machine() or "unknown CPU"
    if not re.search(r"\d", _CLOCK.sub("", name)) and cpu["family"]:
        name += f" (family {cpu['family']}, model {cpu['model_number'] or '?'})"
    if cores is None:
        from retriever.encoding.threads import available_cores

        cores = available_cores()
    flags = " ".join(flag for flag in FLAGS_OF_INTEREST if flag in cpu["flags"]) or "no AVX2"
    memory = memory_bytes(_read(Path("/proc/meminfo")) if meminfo is None else meminfo)
    parts = [name, f"{cores} core{'s' if cores != 1 else ''}", flags]
    if memory:
        parts.append(f"{memory / 2**30:.0f} GB of memory")
    return ", ".join(parts)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def utc_date(now: datetime.datetime | None = None) -> str:
    """``now`` (default: this moment) as the UTC date ``YYYY-MM-DD``."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d")


def command_line(module: str, argv: Sequence[str]) -> str:
    """``python -m <module> <argv>``, quoted for a shell, without ``--no-record`` and ``--page``."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--page":
            skip = True
        elif arg != "--no-record" and not arg.startswith("--page="):
            kept.append(arg)
    return " ".join(["python", "-m", module, *map(shlex.quote, kept)])


def format_cell(value: object) -> str:
    """``value`` as a table cell: one line, ``|`` escaped, surrounding blanks dropped."""
    text = " ".join(str(value).split())
    return _CELL_BORDER.sub(r"\\|", text)


def code_cell(command: str) -> str:
    """A command as a code span (left as it is where it already holds one)."""
    return command if "`" in command else f"`{command}`"


def split_cells(line: str) -> list[str]:
    """The cells of a table line ``| a | b |`` (escaped ``\\|`` kept inside a cell), stripped."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [cell.strip() for cell in _CELL_BORDER.split(body)]


def render_row(row: Mapping[str, object], columns: Sequence[str]) -> str:
    """The table line of ``row``, its cells in ``columns``' order."""
    return "| " + " | ".join(format_cell(row[column]) for column in columns) + " |"


def find_table(lines: Sequence[str], heading: str, columns: Sequence[str]) -> tuple[int, int]:
    """``(header line, end)``: the line numbers of the table of ``columns`` under ``## heading`` and past its last row.

    Raises:
        PageError: no such section (or more than one), no table with these columns in it (the headers
            found are named), or two such tables.
    """
    starts = [i for i, line in enumerate(lines) if line.rstrip() == f"## {heading}"]
    if len(starts) != 1:
        raise PageError(f"the page has {'no' if not starts else len(starts)} section '## {heading}'")
    start = starts[0] + 1
    end = next((i for i in range(start, len(lines)) if re.match(r"#{1,2} ", lines[i])), len(lines))
    tables, headers = [], []
    for i in range(start, end - 1):
        if (
            lines[i].lstrip().startswith("|")
            and _SEPARATOR.match(lines[i + 1].strip())
            and (i == start or not lines[i - 1].lstrip().startswith("|"))
        ):
            headers.append(split_cells(lines[i]))
            if headers[-1] == list(columns):
                last = i + 2
                while last < end and lines[last].lstrip().startswith("|"):
                    last += 1
                tables.append((i, last))
    if not tables:
        found = "; ".join(" | ".join(header) for header in headers) or "none"
        raise PageError(
            f"section '## {heading}' has no table with the columns {' | '.join(columns)} (its tables' columns: {found})"
        )
    if len(tables) > 1:
        raise PageError(f"section '## {heading}' has {len(tables)} tables with the columns {' | '.join(columns)}")
    return tables[0]


def update_table(
    text: str, heading: str, columns: Sequence[str], keys: Sequence[str], rows: Sequence[Mapping[str, object]]
) -> str:
    """``text`` (a whole page) with ``rows`` written into the table of ``columns`` under ``## heading``.

    Each row maps every column to its value. The table's old rows whose ``keys`` cells equal a new row's
    give way to the new rows of that key, at the first old row's place; the new rows of keys the table
    does not hold follow its last row. Nothing else of ``text`` changes.

    Raises:
        PageError: see ``find_table``; also a key that is not a column, or a row without every column.
    """
    missing_keys = [key for key in keys if key not in columns]
    if missing_keys or not keys:
        raise PageError(f"key columns {list(keys)} are not all columns of {list(columns)}")
    for row in rows:
        if set(row) != set(columns):
            raise PageError(f"a row's columns {sorted(row)} are not the table's {list(columns)}")
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.split(newline)
    header, end = find_table(lines, heading, columns)
    positions = [columns.index(key) for key in keys]
    groups: dict[tuple[str, ...], list[str]] = {}
    for row in rows:
        groups.setdefault(tuple(format_cell(row[key]) for key in keys), []).append(render_row(row, columns))
    body: list[str] = []
    for line in lines[header + 2 : end]:
        cells = split_cells(line) + [""] * len(columns)
        key = tuple(cells[p] for p in positions)
        if key not in groups:
            body.append(line)
        elif groups[key]:
            body += groups[key]
            groups[key] = []
    body += [line for new in groups.values() for line in new]
    return newline.join(lines[: header + 2] + body + lines[end:])


def complete_rows(
    rows: Sequence[Mapping[str, object]], columns: Sequence[str], *, command: str, machine: str, date: str
) -> list[dict]:
    """``rows`` with the ``command`` (as code), ``machine`` and ``date`` columns filled in where they are
    columns of the table and a row leaves them out.

    Raises:
        PageError: a row names a column the table does not have, or lacks one of its other columns.
    """
    defaults = {COMMAND: code_cell(command), MACHINE: machine, DATE: date}
    complete = []
    for row in rows:
        unknown = set(row) - set(columns)
        if unknown:
            raise PageError(f"a row names columns the table does not have: {sorted(unknown)}")
        filled = {column: row.get(column, defaults.get(column)) for column in columns}
        lacking = [column for column, value in filled.items() if value is None]
        if lacking:
            raise PageError(f"a row lacks the columns {lacking}")
        if COMMAND in row:
            filled[COMMAND] = code_cell(str(row[COMMAND]))
        complete.append(filled)
    return complete


@contextlib.contextmanager
def _page_lock(page: Path) -> Iterator[None]:
    """One writer of ``page`` at a time (an advisory lock on its folder, where the system has them)."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system: no lock
        yield
        return
    fd = os.open(page.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_rows(
    page: Path,
    heading: str,
    columns: Sequence[str],
    keys: Sequence[str],
    rows: Sequence[Mapping[str, object]],
    *,
    command: str,
    machine: str | None = None,
    date: str | None = None,
) -> int:
    """Write ``rows`` into ``page``'s table (``complete_rows``, then ``update_table``); returns how many.

    The page is read and replaced under a lock, whole (``retriever.storage.atomic``), only where it changes.

    Raises:
        PageError: the page does not hold the table, or a row does not fit it (the page is left as it was).
        OSError: the page cannot be read or written.
    """
    from retriever.storage.atomic import atomic_write

    page = Path(page)
    complete = complete_rows(
        rows, columns, command=command, machine=machine or describe_machine(), date=date or utc_date()
    )
    with _page_lock(page):
        old = page.read_bytes().decode("utf-8")
        new = update_table(old, heading, columns, keys, complete)
        if new != old:
            atomic_write(page, lambda tmp: tmp.write_bytes(new.encode("utf-8")))
    return len(complete)


def add_options(parser: argparse.ArgumentParser) -> None:
    """``--no-record`` (leave the page alone) and ``--page PATH`` (default: docs/benchmarks.md)."""
    parser.add_argument(
        "--no-record", action="store_true", help="do not write the results into docs/benchmarks.md (smoke runs)"
    )
    parser.add_argument("--page", type=Path, default=PAGE, help="the results page written (default %(default)s)")


def check(args: argparse.Namespace, heading: str, columns: Sequence[str]) -> None:
    """Before a run: stop it (``SystemExit``) where it would record into a page without its table."""
    if getattr(args, "no_record", True):
        return
    try:
        find_table(Path(args.page).read_text(encoding="utf-8").split("\n"), heading, columns)
    except (PageError, OSError) as exc:
        raise SystemExit(f"{args.page}: {exc} (--no-record runs without writing it)") from exc


def record(
    args: argparse.Namespace,
    heading: str,
    columns: Sequence[str],
    keys: Sequence[str],
    rows: Sequence[Mapping[str, object]],
    *,
    command: str,
) -> None:
    """After a run: ``write_rows`` into ``args.page`` unless ``args.no_record``; says what it did.

    Raises:
        SystemExit: the page does not hold the table (nothing written).
    """
    if getattr(args, "no_record", True):
        print(f"not recorded in {getattr(args, 'page', PAGE)} (--no-record)")
        return
    try:
        count = write_rows(args.page, heading, columns, keys, rows, command=command)
    except (PageError, OSError) as exc:
        raise SystemExit(f"{args.page} not written: {exc}") from exc
    print(f"recorded {count} row{'s' if count != 1 else ''} in {args.page} (## {heading})")
