"""Former home of the BEIR evaluation, now ``indexer.beir``; this name is that module.

``import app.evaluate`` gives ``indexer.beir`` itself, so code written
against the old path (``evaluate``, ``EVAL_ROOT``, ``default_collection_dir``)
keeps working, patches of ``EVAL_ROOT`` included. New code imports
``indexer.beir``.
"""

import sys

from indexer import beir

sys.modules[__name__] = beir
