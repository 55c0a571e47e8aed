"""``semsearch fill``: a masked-LM model's top tokens for each ``[MASK]`` of a text.

``-k`` takes its default from ``training.fill.fill_mask``.
"""

from __future__ import annotations

import argparse
import json

from app.commands.base import EXIT_OK, add_commands, parameter_defaults


def register(sub) -> None:
    """Add ``fill`` to the command's subparsers."""
    add_commands(sub, [("fill", "show a masked-LM model's top tokens for each [MASK] in a text", add_fill_flags)])


def add_fill_flags(p: argparse.ArgumentParser) -> None:
    """Flags of ``semsearch fill``; ``-k`` defaults to ``fill_mask``'s."""
    from training.fill import fill_mask

    p.add_argument("text", metavar="TEXT", help="text with one or more [MASK] tokens")
    p.add_argument(
        "--model", required=True, metavar="DIR", help="model directory (e.g. from 'semsearch train pretrain')"
    )
    p.add_argument(
        "-k",
        type=int,
        default=parameter_defaults(fill_mask)["k"],
        metavar="N",
        help="tokens per mask (default %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON list (one list of [token, probability] per mask)")
    p.set_defaults(handler=run_fill)


def run_fill(args) -> int:
    """Print the top ``-k`` tokens for each ``[MASK]`` of ``args.text``."""
    from training.fill import fill_mask

    guesses = fill_mask(args.text, args.model, k=args.k)
    if args.json:
        print(json.dumps([[[token, round(p, 6)] for token, p in mask] for mask in guesses], ensure_ascii=False))
        return EXIT_OK
    for number, mask in enumerate(guesses, 1):
        print(f"[MASK] {number}: " + "  ".join(f"{token} {p:.3f}" for token, p in mask))
    return EXIT_OK
