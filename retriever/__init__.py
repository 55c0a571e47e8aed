"""semsearch's read side and shared core: embed, store and search documents.

Quick start::

    from retriever import Collection
    col = Collection.create("my-collection")
    col.add([{"id": "1", "title": "Tea", "text": "Green tea is steamed..."}])
    for hit in col.search("how is green tea made", k=3):
        print(f"{hit.score:.3f} {hit.title}: {hit.text[:80]}")

``Collection`` (``retriever.collection``) is the one facade; behind it three
rooms follow the data: ``retriever.encoding`` (text to unit vectors),
``retriever.storage`` (the collection directory: segments, catalog,
generations, the writer) and ``retriever.search`` (rankings, fusion,
filters, the searcher; ``SearchOptions``, what a search takes besides its query). ``retriever.validation`` checks every public
argument once; ``documents``, ``errors``, ``deadline``, ``evaluation``,
``jsonl`` and ``unicode_policy`` are shared by all three.
"""

from retriever.encoding import threads as _threads

_threads.set_environment()  # before torch, FAISS or ONNX Runtime load: passive OpenMP, one count

from retriever.collection import Collection  # noqa: E402
from retriever.documents import Document, Hit  # noqa: E402
from retriever.encoding.embedder import Embedder, InputTooLongWarning  # noqa: E402
from retriever.encoding.models import DEFAULT_MODEL  # noqa: E402
from retriever.errors import (  # noqa: E402
    BadInputError,
    CollectionLockedError,
    CollectionNotFoundError,
    CorruptCollectionError,
    FilterError,
    ModelMismatchError,
    ModelSwitchedError,
    SemsearchError,
)
from retriever.judgments.records import JudgedSet, Judgment, JudgmentImport  # noqa: E402
from retriever.search.options import SearchOptions  # noqa: E402
from retriever.storage.changes import WriteReport  # noqa: E402

__all__ = [
    "Collection",
    "SearchOptions",
    "WriteReport",
    "Judgment",
    "JudgedSet",
    "JudgmentImport",
    "Document",
    "Hit",
    "Embedder",
    "DEFAULT_MODEL",
    "InputTooLongWarning",
    "SemsearchError",
    "BadInputError",
    "FilterError",
    "CollectionNotFoundError",
    "CollectionLockedError",
    "CorruptCollectionError",
    "ModelMismatchError",
    "ModelSwitchedError",
]
