"""Encoding: text in, unit vectors out.

``tokens`` (fast WordPiece on the ``tokenizers`` library) and ``chunking``
(overlapping token windows with character offsets) prepare text; the
``Embedder`` mean-pools a sentence-transformers model's token states into
normalized vectors, on the backend (``backends``: torch, ONNX Runtime,
OpenVINO) that ``backends.choice`` measured fastest on this machine, from
graphs ``export`` writes once. ``batching`` meets concurrent queries in one
call, ``threads`` caps every library to the cores available, and
``ray_embed`` runs the same embedder over a Ray Dataset column.
"""
