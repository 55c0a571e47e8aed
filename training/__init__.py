"""Training: encoders that ``Embedder`` loads like any other model.

``training.tokenizer`` trains a WordPiece vocabulary, ``training.pretrain``
pretrains a BERT (or RoFormer) encoder by masked language modelling,
``training.contrastive`` teaches mean-pooled embeddings to retrieve (in-batch
negatives), ``training.adapt`` adapts an encoder to a collection's own
documents from pseudo-queries, and ``training.recipes`` chains the stages
into resumable runs. Each writes a sentence-transformers model directory.
"""
