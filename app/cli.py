"""The ``semsearch`` command: index, search, delete and inspect collections; train models.

Exit status: 0 on success, 2 for bad usage or bad input (including files
skipped while indexing), 1 for any other failure. Errors are one line on
stderr; set ``SEMSEARCH_DEBUG=1`` for a traceback.

Each command group lives in ``app/commands/`` and adds its own subparser;
a command's flags (and the modules their defaults come from) load only when
that command runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from app.commands import (
    adapting,
    fill,
    indexing,
    judging,
    keys,
    learning,
    maintenance,
    searching,
    services,
    sharding,
    tagging,
    train,
    watching,
)
from app.commands.base import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, Parser, UsageError, fail
from app.commands.services import UI_PASSWORD_ENV

#: The command groups, in the order ``semsearch --help`` lists their commands.
GROUPS = (
    indexing,
    watching,
    searching,
    judging,
    maintenance,
    sharding,
    tagging,
    services,
    keys,
    train,
    fill,
    adapting,
    learning,
)


def build_parser() -> argparse.ArgumentParser:
    """The ``semsearch`` parser: one subparser per command, each group adding its own."""
    parser = Parser(
        prog="semsearch", description="Semantic search over your documents: index files, then search them by meaning."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``semsearch`` console script."""
    from retriever.errors import BadInputError, SemsearchError

    for stream in (sys.stdout, sys.stderr):  # a name that is not UTF-8 is printed escaped, never a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        args = build_parser().parse_args(argv)
        return args.handler(args)
    except (UsageError, BadInputError) as exc:
        fail(str(exc))
        return EXIT_BAD_INPUT
    except SemsearchError as exc:
        fail(str(exc))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        fail("interrupted; every committed batch is kept, run the same command again to resume")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the one place that turns surprises into one line
        if os.environ.get("SEMSEARCH_DEBUG"):
            raise
        fail(f"unexpected {type(exc).__name__}: {exc} (SEMSEARCH_DEBUG=1 shows the traceback)")
        return EXIT_FAILURE


__all__ = ["main", "build_parser", "UsageError", "EXIT_OK", "EXIT_FAILURE", "EXIT_BAD_INPUT", "UI_PASSWORD_ENV"]


if __name__ == "__main__":
    sys.exit(main())
