"""Search: from a query to ranked document keys.

``vector_index`` (FAISS: exact or IVF per segment), ``bm25`` (the analyzer,
postings and a top-k scorer over segments with collection-wide statistics),
``bm25_matrix`` (an in-memory BM25 over a small corpus), ``fusion`` (convex
and reciprocal-rank fusion), ``filters`` (the ``where`` language) and
``searcher`` (dense, keyword and hybrid rankings over one generation's view,
and the hits they become).
"""
