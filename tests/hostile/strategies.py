"""Hypothesis strategies for hostile input: odd text, odd numbers, odd shapes, deep nesting."""

from __future__ import annotations

from hypothesis import strategies as st

# Text of every kind, lone surrogates (category Cs) and control characters included.
any_char = st.characters(codec=None, categories=None, exclude_categories=[])
hostile_text = st.one_of(
    st.text(any_char, max_size=20),
    st.sampled_from(
        [
            "",
            " ",
            "\n",
            "\x00",
            "\ud800",
            "a\ud800b",
            'a"b',
            "a\\b",
            "a.b",
            ".a",
            "a..b",
            "$eq",
            "$where",
            "lang",
            "year",
            "tags",
            "a.b",
            "größe",
            "x" * 300,
            "é" * 5000,
            "'; DROP TABLE x;--",
        ]
    ),
)
hostile_int = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 10**30, 2**53 + 1]),
)
hostile_float = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e308, -0.0, 5e-324]))
scalars = st.one_of(st.none(), st.booleans(), hostile_int, hostile_float, hostile_text)
json_like = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(hostile_text, inner, max_size=4)),
    max_leaves=12,
)


def nested(depth_max: int = 30) -> st.SearchStrategy:
    """A JSON value nested ``depth`` levels deep through one key or list (``$not``, ``$and``, a field...)."""

    def build(args):
        depth, key, leaf = args
        value = leaf
        for _ in range(depth):
            value = {key: value} if key != "$and" and key != "$or" else {key: [value]}
        return value

    return st.tuples(
        st.integers(0, depth_max),
        st.sampled_from(["$not", "$and", "$or", "lang", "$in"]),
        st.one_of(st.just({"lang": "en"}), json_like),
    ).map(build)


# Filters from the grammar, with hostile parts: mostly well-formed, often over a limit.
fields = st.one_of(
    st.sampled_from(["lang", "year", "tags", "a.b", "reviewed", "score", "größe", "missing"]), hostile_text
)
values = st.one_of(st.sampled_from(["en", "de", 2019, 2020, 2021, 0.5, True, False]), scalars)
in_lists = st.one_of(
    st.lists(values, max_size=6),
    st.integers(900, 1200).map(lambda n: list(range(n))),
    st.integers(900, 1200).map(lambda n: [f"v{i}" for i in range(n)]),
)
operators = st.one_of(
    st.tuples(st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]), values),
    st.tuples(st.sampled_from(["$in", "$nin"]), in_lists),
    st.tuples(hostile_text, json_like),
)
conditions = st.one_of(
    values,
    st.dictionaries(operators.map(lambda t: t[0]), values, max_size=3),
    st.lists(operators, min_size=1, max_size=3).map(dict),
)
leaf_filters = st.dictionaries(fields, conditions, min_size=1, max_size=3)
grammar_filters = st.recursive(
    leaf_filters,
    lambda inner: st.one_of(
        st.builds(lambda f: {"$not": f}, inner),
        st.lists(inner, min_size=1, max_size=4).map(lambda fs: {"$and": fs}),
        st.lists(inner, min_size=1, max_size=4).map(lambda fs: {"$or": fs}),
        st.lists(inner, min_size=2, max_size=3).map(lambda fs: {k: v for f in fs for k, v in f.items()}),
    ),
    max_leaves=40,
)
filters = st.one_of(grammar_filters, nested(), json_like, st.just({}))


# Folders for the indexer's walk and prune: links in and out of the tree, names that differ only in case,
# and Markdown built to make a heading pattern backtrack.


def symlinked_trees() -> st.SearchStrategy:
    """A folder plan: ``(files, links)`` with files ``(relative path, text)`` and links ``(relative path, target)``.

    A target is ``("in", i)`` (the i-th file, modulo), ``("out", name)`` (a file
    outside the tree), ``("outdir", name)`` (a directory outside), ``("dangling",
    name)`` or ``("self", 0)`` (a link to its own directory: a loop).
    """
    part = st.sampled_from(["a", "b", "A", "sub", "déjà", "x y"])
    rel = st.lists(part, min_size=0, max_size=2).map("/".join)
    file_name = st.sampled_from(["n.txt", "N.TXT", "r.md", "d.jsonl", "t.csv"])
    files = st.lists(
        st.tuples(
            st.tuples(rel, file_name).map(lambda t: f"{t[0]}/{t[1]}".lstrip("/")),
            st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=30),
        ),
        min_size=1,
        max_size=5,
        unique_by=lambda f: f[0],
    )
    target = st.one_of(
        st.tuples(st.just("in"), st.integers(0, 4)),
        st.tuples(st.sampled_from(["out", "outdir", "dangling"]), st.sampled_from(["k.txt", "s.md"])),
        st.just(("self", 0)),
    )
    link_name = st.tuples(rel, st.sampled_from(["l.txt", "L.md", "ln"])).map(lambda t: f"{t[0]}/{t[1]}".lstrip("/"))
    links = st.lists(st.tuples(link_name, target), max_size=4, unique_by=lambda link: link[0])
    return st.tuples(files, links)


def case_colliding_folders() -> st.SearchStrategy:
    """Two to four folder names that are equal ignoring ASCII case (``a``, ``A``, ``a_`` ...), with file names."""
    base = st.sampled_from(["a", "notes", "Data", "x%", "a_b", "é"])

    def variants(name: str) -> st.SearchStrategy:
        spellings = sorted({name, name.lower(), name.upper(), name.swapcase(), name.title()})
        pool = spellings + [name + "_", name.replace("_", "%")]
        return st.lists(st.sampled_from(pool), min_size=2, max_size=4, unique=True)

    return base.flatmap(variants)


def pathological_markdown() -> st.SearchStrategy:
    """Markdown text whose heading lines are long runs of blanks, ``#`` and tabs around little text."""
    piece = st.sampled_from([" ", "\t", "#", "a", "\u3000", "```", "~~~", "\n"])
    short = st.lists(piece, max_size=30).map("".join)
    runs = st.tuples(
        st.sampled_from(["# a", "###### ", "   #\t", "# ", "#"]),
        st.sampled_from([" ", "\t", " #", "# ", "\t#"]),
        st.integers(1000, 60_000),
        st.sampled_from(["", "b", "#", " #", "\t"]),
    )
    long_line = runs.map(lambda r: r[0] + r[1] * (r[2] // len(r[1])) + r[3])
    return st.one_of(short, st.tuples(short, long_line, short).map("\n".join))


def host_headers() -> st.SearchStrategy:
    """``(Host header, loopback?)``: loopback names and addresses with ports and case, and names of other hosts
    that look like them (``localhost.evil``, ``127.0.0.1.nip.io``, ``[::1].x``), and odd bytes."""
    port = st.one_of(st.just(""), st.integers(0, 65535).map(lambda p: f":{p}"))
    loopback = st.tuples(
        st.sampled_from(["localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "[::1]", "Localhost"]), port
    ).map(lambda t: (t[0] + t[1], True))
    label = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)
    lookalike = st.tuples(st.sampled_from(["localhost", "127.0.0.1", "[::1]", "evil", "0.0.0.0", ""]), label, port).map(
        lambda t: (f"{t[0]}.{t[1]}.example{t[2]}" if t[0] else f"{t[1]}.example{t[2]}", False)
    )
    odd = (
        st.text(st.characters(codec="latin-1", exclude_characters="\r\n\x00"), min_size=1, max_size=40)
        .filter(
            lambda s: (
                s.strip().lower().rsplit(":", 1)[0] not in ("localhost", "127.0.0.1", "[::1]")
                and not s.strip().lower().startswith(("127.", "[::1]", "::1", "localhost"))
                and s.strip() != ""
            )
        )
        .map(lambda s: (s, None))
    )  # None: either answer, but never a 5xx
    return st.one_of(loopback, lookalike, odd)


def foreign_catalog_urls() -> st.SearchStrategy:
    """Catalog URLs a crafted manifest might name: other hosts, ports, users, libpq host overrides in the query,
    drivers, a password already in the URL or the query, and some that are no URL at all."""
    host = st.one_of(
        st.sampled_from(["collector.example", "10.0.0.7", "[2001:db8::1]", "localhost", "db.internal"]),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz.-", min_size=1, max_size=20),
    )
    driver = st.sampled_from(
        [
            "postgresql+psycopg",
            "postgresql",
            "postgresql+psycopg2",
            "postgresql+pg8000",
            "postgresql+asyncpg",
            "mysql+pymysql",
        ]
    )
    query = st.lists(
        st.sampled_from(
            [
                "host=collector.example",
                "hostaddr=10.9.9.9",
                "sslmode=disable",
                "require_auth=password",
                "host=db.internal,collector.example",
                "port=1",
            ]
        ),
        max_size=3,
    ).map(lambda qs: ("?" + "&".join(qs)) if qs else "")
    user = st.sampled_from(["victim", "postgres", "a%40b"])
    port = st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}"))
    url = st.tuples(driver, user, host, port, query).map(lambda t: f"{t[0]}://{t[1]}@{t[2]}{t[3]}/db{t[4]}")
    return st.one_of(url, hostile_text)


# -- crafted collection directories (a collection may come from someone else) --------------------------------
SEGMENT_FILES = [
    "segment.json",
    "keys.npy",
    "doc_chunks.npy",
    "spans.npy",
    "byte_spans.npy",
    "text.bin",
    "text_offsets.npy",
    "doc_lengths.npy",
    "terms.txt",
    "vectors.faiss",
    "postings.indptr.npy",
    "postings.rows.npy",
    "postings.tf.npy",
    "chunk_terms.indptr.npy",
    "chunk_terms.rows.npy",
]
SEGMENT_ARRAYS = [name for name in SEGMENT_FILES if name.endswith(".npy")]


def segment_names() -> st.SearchStrategy:
    """Names a hostile catalog may give a segment: absolute paths, ``..`` escapes, odd text, odd types."""
    return st.one_of(
        st.sampled_from(
            [
                "/etc",
                "/tmp/x",
                "..",
                "../outside",
                "s000001/../../outside",
                "s000001/",
                "./s000001",
                "S000001",
                "s1",
                "s000001\x00",
                "s" + "9" * 40,
                "",
                " ",
                "segments",
            ]
        ),
        hostile_text,
        st.integers(-5, 5),
        st.none(),
        st.lists(st.text(max_size=3), max_size=2),
    )


def collection_damage() -> st.SearchStrategy:
    """One way to damage a collection's first segment: ``(kind, file, detail)``.

    Kinds: ``symlink`` (the file links to another file), ``fifo`` (the file is a
    FIFO), ``truncate`` (the file cut to ``detail`` of its bytes, 0 <= detail < 1),
    ``reshape`` (an array of another shape, ``detail`` = (shape, dtype)), and
    ``faiss`` (another index, ``detail`` = (vectors, dimension)).
    """
    shapes = st.lists(st.integers(0, 6), min_size=0, max_size=3).map(tuple)
    dtypes = st.sampled_from(["int64", "int32", "float32", "float64", "uint8", "bool"])
    truncatable = [name for name in SEGMENT_FILES if name != "terms.txt"]  # a shorter vocabulary is still one
    return st.one_of(
        st.tuples(st.just("symlink"), st.sampled_from(SEGMENT_FILES), st.none()),
        st.tuples(st.just("fifo"), st.sampled_from(SEGMENT_FILES), st.none()),
        st.tuples(st.just("truncate"), st.sampled_from(truncatable), st.floats(0, 0.99)),
        st.tuples(st.just("reshape"), st.sampled_from(SEGMENT_ARRAYS), st.tuples(shapes, dtypes)),
        st.tuples(st.just("faiss"), st.just("vectors.faiss"), st.tuples(st.integers(0, 12), st.integers(1, 40))),
    )


#: Where a crafted snapshot or collection folder plants something, relative to it (``SEG``: its first segment).
SNAPSHOT_FILES = ["SEG/" + name for name in SEGMENT_FILES] + [
    "catalog.sqlite",
    "manifest.json",
    "HEAD",
    "taggers/topic/meta.json",
    "models/adapted/config.json",
]
SNAPSHOT_FOLDERS = ["SEG", "segments", "taggers", "models/adapted"]
MANIFEST_CHANGES = [
    "model sha256",
    "model dim",
    "format",
    "format version",
    "catalog url",
    "not json",
    "a list",
    "pending switch",
    "model outside",
    "unknown field",
]


def crafted_snapshot() -> st.SearchStrategy:
    """One way to craft a snapshot (or collection) folder: ``(kind, place)``.

    Kinds: ``link`` (the file at ``place`` links to a secret file outside), ``link-folder`` (a folder links to a
    copy of itself outside), ``fifo``, ``folder`` (a folder where a file belongs), ``foreign`` (an extra file or
    link beside ``place``), and ``manifest`` (``place`` names a change of ``MANIFEST_CHANGES``).
    """
    return st.one_of(
        st.tuples(st.sampled_from(["link", "fifo", "folder", "foreign"]), st.sampled_from(SNAPSHOT_FILES)),
        st.tuples(st.just("link-folder"), st.sampled_from(SNAPSHOT_FOLDERS)),
        st.tuples(st.just("manifest"), st.sampled_from(MANIFEST_CHANGES)),
    )


def hostile_destinations() -> st.SearchStrategy:
    """Destinations a caller may name for a snapshot, relative to a folder holding the collection ``col``, a
    folder ``other``, a link ``link`` to the collection and a file ``file``: escapes, odd names, parts of them."""
    return st.one_of(
        st.sampled_from(
            [
                "",
                ".",
                "..",
                "../..",
                "/",
                "/etc",
                "/tmp",
                "col",
                "col/taggers",
                "col/segments/new",
                "other/taggers",
                "other",
                "snap/../col/x",
                "./snap",
                "snap/",
                "~",
                "a" * 300,
                "a/" * 60,
                "snap\x00x",
                "\ud800",
                "con",
                "nul",
                " ",
                "snap\n",
                "-rf",
                "$HOME",
                "link/x",
                "link",
                "file",
                "file/x",
            ]
        ),
        st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=40).filter(
            lambda name: not name.startswith(("/", "~"))
        ),  # only the sampled ones above name real places
    )
