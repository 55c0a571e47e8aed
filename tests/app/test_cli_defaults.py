"""Every ``semsearch`` flag that mirrors a setting of the code it calls has that setting's default."""

from __future__ import annotations

from dataclasses import MISSING, fields

import pytest

from app.cli import build_parser
from app.commands.base import parameter_defaults

#: The fewest flags each step accepts; the fields they set are left out of the comparison.
PRETRAIN = ("train", "pretrain", "--text", "t", "--tokenizer", "tok", "-o", "out")
PRETRAIN_GIVEN = {"text": ["t"], "tokenizer": "tok", "output_dir": "out"}
CONTRASTIVE = ("train", "contrastive", "--from", "model", "-o", "out")
CONTRASTIVE_GIVEN = {"from_model": "model", "output_dir": "out"}


def parsed(*argv: str) -> dict:
    return vars(build_parser().parse_args(list(argv)))


def test_pretrain_flags_mirror_every_pretrain_config_field():
    from training.pretrain import PretrainConfig

    assert_mirrors(
        parsed(*PRETRAIN), PretrainConfig, PRETRAIN_GIVEN, unmirrored={"weight_decay", "mlm_probability", "device"}
    )


def test_contrastive_flags_mirror_every_contrastive_config_field():
    from training.contrastive import ContrastiveConfig

    assert_mirrors(parsed(*CONTRASTIVE), ContrastiveConfig, CONTRASTIVE_GIVEN, unmirrored={"weight_decay", "device"})


def assert_mirrors(args: dict, config: type, given: dict, unmirrored: set[str]) -> None:
    """Each field of ``config`` but ``unmirrored`` has a flag (its ``dest`` the field's name) whose default is the field's."""
    names = {field.name for field in fields(config)}
    assert unmirrored <= names, "a field named unmirrored is gone"
    assert names - unmirrored <= set(args), f"fields without a flag: {sorted(names - unmirrored - set(args))}"
    assert {name: args[name] for name in given} == given
    for field in fields(config):
        if field.name not in unmirrored and field.name not in given:
            assert field.default is not MISSING, f"{field.name} has no default: give it in the test's argv"
            assert args[field.name] == field.default, f"--{field.name.replace('_', '-')} drifted from {config.__name__}"


def test_tokenizer_and_fill_flags_default_to_their_functions():
    from training.fill import fill_mask
    from training.tokenizer import train_tokenizer

    args = parsed("train", "tokenizer", "corpus", "-o", "out")
    for name, default in parameter_defaults(train_tokenizer).items():
        assert args[name] == default, name
    assert parsed("fill", "a [MASK]", "--model", "m")["k"] == parameter_defaults(fill_mask)["k"]


def test_recipe_choices_are_the_recipes():
    from app.commands.base import UsageError
    from training.recipes import RECIPES

    assert [parsed("train", "recipe", name)["recipe"] for name in RECIPES] == list(RECIPES)
    with pytest.raises(UsageError, match="invalid choice"):
        parsed("train", "recipe", "no-such-recipe")


@pytest.mark.parametrize("argv", [("search", "q", "-c", "col"), ("eval", "-d", "data")], ids=["search", "eval"])
def test_search_flags_default_to_the_retriever(argv):
    from indexer.beir import evaluate
    from retriever.collection import DEFAULT_MODE, Collection

    args = parsed(*argv)
    search = parameter_defaults(Collection.search)  # unset: the collection's own settings
    assert (args["mode"], args["fusion"], args["alpha"], args["feedback"]) == (
        DEFAULT_MODE,
        search["fusion"],
        search["alpha"],
        search["feedback"],
    )
    if argv[0] == "search":
        assert args["k"] == parameter_defaults(Collection.search)["k"]
    else:
        assert args["split"] == parameter_defaults(evaluate)["split"]


def test_index_and_serve_flags_default_to_the_indexer_and_the_service():
    pytest.importorskip("fastapi")
    from app.server import DEFAULT_DEADLINE_S
    from indexer.loaders import DEFAULT_MAX_BYTES

    assert parsed("index", "docs", "-c", "col")["max_file_mb"] * 1024 * 1024 == DEFAULT_MAX_BYTES
    assert parsed("serve", "-c", "col")["deadline"] == DEFAULT_DEADLINE_S


def test_tag_flags_default_to_collection_tag():
    from retriever.collection import Collection

    args = parsed("tag", "-c", "col", "--field", "f", "--examples", "e.jsonl")
    defaults = parameter_defaults(Collection.tag)
    assert (args["method"], args["min_probability"]) == (defaults["method"], defaults["min_probability"])
