"""Judgments: which documents answer which queries, as a collection's users said, kept in its catalog.

``store`` keeps them (the ``semsearch_judgments`` table), ``files`` reads
them from a JSONL or BEIR qrels file, ``scoring`` measures a collection on
them, and ``learned`` keeps the report of the last ``semsearch learn``.
"""
