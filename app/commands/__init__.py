"""The ``semsearch`` commands, one module per group; ``app.cli`` puts their subparsers together.

``indexing`` (index), ``searching`` (search, eval), ``maintenance`` (delete,
info, compact, upgrade), ``services`` (ui, serve) and ``train`` (train
tokenizer/pretrain/contrastive/recipe, fill). Each module's ``register(sub)``
adds its commands; their flags are added on first use (``base.Parser``), and
each command's ``handler`` runs it and returns the exit status.
"""
