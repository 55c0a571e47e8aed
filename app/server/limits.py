"""The HTTP API's limits and the environment variables it reads, shared by every part of the service."""

from __future__ import annotations

API_KEY_ENV = "SEMSEARCH_API_KEY"
#: Settings of ``semsearch serve --workers N`` for each worker process, as JSON (see ``app_from_environment``).
SERVE_ENV = "SEMSEARCH_SERVE"
MAX_BODY_BYTES = 10 * 1024 * 1024
MAX_QUERY_CHARS = 2_000
MAX_K = 1_000
MAX_EMBED_TEXTS = 256
MAX_TEXT_CHARS = 100_000
MAX_EMBED_CHARS = 1_000_000  # all texts of one /embed request together
MAX_DOCUMENTS = 1_000
MAX_VECTOR_DIM = 4_096
DEFAULT_DEADLINE_S = 4.0
MAX_DRAIN_BYTES = 64 * 1024 * 1024  # an oversized body up to this size is read (and dropped) before the 413
