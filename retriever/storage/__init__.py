"""Storage: a collection directory's files and the generations that name them.

``manifest`` (model identity, settings, format), ``catalog`` (the SQL rows:
documents, metadata, generations) with ``catalog_url`` and
``metadata_index`` (filters compiled to SQL), ``segment`` (immutable
vectors, chunks and postings), ``view`` (the segments of one generation with
their deletions), ``generations`` (the ``HEAD`` file readers watch),
``staging`` (segments written before the lock is taken), ``writer`` (commit,
deletions, publish, merge under the single-writer lock), ``merging`` (which
segments merge), ``cleanup`` (files no generation references; a directory
whose manifest is lost is refused, never cleared), ``segment_files`` (a
segment's files checked before they are trusted), ``leftovers`` (temporaries
of killed processes), ``atomic`` (durable writes) and ``upgrade`` (older
formats converted).
"""
