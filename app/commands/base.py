"""What every ``semsearch`` command shares: exit codes, usage errors, the parser class, common flags."""

from __future__ import annotations

import argparse
import inspect
import sys
from typing import Any, Callable, Sequence

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(Exception):
    """Bad command-line usage (exit status 2)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (no usage dump), raised as ``UsageError``.

    Args:
        populate: Adds this parser's arguments on first use (a parse or its
            help), so that a command's defaults, and the modules they are read
            from, load only when that command runs: ``semsearch search`` never
            imports the training code (nor torch).
    """

    def __init__(
        self, *args: Any, populate: Callable[[argparse.ArgumentParser], None] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.populate = populate

    def ensure_populated(self) -> None:
        """Add the arguments now, once."""
        if self.populate is not None:
            populate, self.populate = self.populate, None
            populate(self)

    def parse_known_args(self, args=None, namespace=None):
        self.ensure_populated()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self.ensure_populated()
        return super().format_usage()

    def format_help(self) -> str:
        self.ensure_populated()
        return super().format_help()

    def error(self, message: str):  # one line, no usage dump
        raise UsageError(f"{message} (see '{self.prog} --help')")


def add_commands(sub, commands: Sequence[tuple[str, str, Callable[[argparse.ArgumentParser], None]]]) -> None:
    """Add ``(name, help, populate)`` commands to the subparsers ``sub``, each populated on first use."""
    for name, help_text, populate in commands:
        sub.add_parser(name, help=help_text, populate=populate)


def add_collection_arg(parser: argparse.ArgumentParser) -> None:
    """The required ``-c/--collection DIR``."""
    parser.add_argument("-c", "--collection", required=True, metavar="DIR", help="collection directory")


def parameter_defaults(function: Callable) -> dict[str, Any]:
    """The default of each parameter of ``function`` that has one, by name."""
    return {
        name: parameter.default
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


def fail(message: str) -> None:
    """Print ``semsearch: error: <message>`` on one line of stderr."""
    print(f"semsearch: error: {' '.join(message.split())}", file=sys.stderr)
