"""Search: from a query to ranked document keys.

``vector_index`` (FAISS: exact or IVF per segment), ``bm25`` (the analyzer,
postings and a top-k scorer over segments with collection-wide statistics),
``bm25_matrix`` (an in-memory BM25 over a small corpus), ``fusion`` (one
strategy per module behind the ``Fusion`` interface: convex and
reciprocal-rank fusion, and the hybrid depth), ``options`` (``SearchOptions``: a search's settings as one checked
value) and ``searcher`` (dense, keyword and hybrid rankings over one
generation's view, and the hits they become).
"""
