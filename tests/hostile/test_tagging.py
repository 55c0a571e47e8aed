"""Generated tagging calls and examples files: each tags, or raises a BadInputError naming the cause; a refusal writes nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retriever.errors import BadInputError
from retriever.tagging.examples import read_examples
from tests.hostile.conftest import case, examples, fingerprint
from tests.hostile.strategies import hostile_float, hostile_text, json_like

IDS = ["tea", "coffee", "kaffee", "rivers"]
record = st.fixed_dictionaries(
    {"label": st.one_of(st.sampled_from(["drink", "nature"]), hostile_text, json_like)},
    optional={
        "id": st.one_of(st.sampled_from(IDS), hostile_text, json_like),
        "text": st.one_of(st.just("tea leaves and water"), hostile_text, json_like),
        "title": st.one_of(hostile_text, json_like),
        "extra": json_like,
    },
)
good_pair = st.just([{"id": "tea", "label": "drink"}, {"id": "rivers", "label": "nature"}])
examples_arg = st.one_of(
    good_pair, st.lists(record, max_size=5), st.lists(record, max_size=3).map(iter), json_like, st.binary(max_size=8)
)
tag_kwargs = st.fixed_dictionaries(
    {"field": st.one_of(st.sampled_from(["kind", "größe/ü"]), hostile_text, json_like), "examples": examples_arg},
    optional={
        "method": st.one_of(st.sampled_from(["auto", "embedding", "tfidf"]), hostile_text, json_like),
        "min_probability": st.one_of(hostile_float, st.integers(-2, 2), json_like),
        "dry_run": st.booleans(),
    },
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kwargs=tag_kwargs)
def test_a_tag_call_tags_or_names_its_bad_argument(col, kwargs):
    with case("tagging API"):
        before = fingerprint(col)
        try:
            report = col.tag(**kwargs)
        except BadInputError as exc:
            assert str(exc).strip()
            assert fingerprint(col) == before, kwargs
        else:
            assert report.documents == len(col)


@settings(max_examples=examples(60), deadline=None)
@given(
    content=st.one_of(st.binary(max_size=300), hostile_text.map(lambda t: t.encode("utf-8", "surrogatepass"))),
    suffix=st.sampled_from([".jsonl", ".csv", ".tsv", ".txt"]),
)
def test_an_examples_file_reads_or_names_its_line(tmp_path_factory, content, suffix):
    path = tmp_path_factory.mktemp("examples") / f"examples{suffix}"
    path.write_bytes(content)
    with case("examples files"):
        try:
            read_examples(path)
        except BadInputError as exc:
            assert str(exc).strip()
