"""Adapters for other libraries: thin classes that translate and delegate to ``Collection``.

``retriever.integrations.langchain`` (extra ``langchain``) and
``retriever.integrations.llamaindex`` (extra ``llamaindex``) each import their
library on import and name the extra to install when it is missing;
``external_embedder`` lets a collection embed with another library's model.
"""
