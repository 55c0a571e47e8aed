"""Errors raised by semsearch. Each names its cause in one line.

``BadInputError`` and its subclasses mean the caller gave something unusable
(exit status 2 on the command line); any other ``SemsearchError`` is a failure
of the operation itself (exit status 1).
"""


class SemsearchError(Exception):
    """Base class for every error semsearch raises on purpose."""


class BadInputError(SemsearchError, ValueError):
    """The caller's input is unusable: a malformed file, filter or argument."""


class FilterError(BadInputError):
    """A metadata filter (``where=``) is malformed."""


class CollectionNotFoundError(BadInputError):
    """The path holds no semsearch collection."""


class ModelMismatchError(BadInputError):
    """A collection was opened with a different model than it was built with."""


class ModelSwitchedError(ModelMismatchError):
    """Documents were embedded by the model a collection used before it switched to another (``switch_model``)."""


class CollectionLockedError(SemsearchError):
    """Another process is writing to the collection."""


class CorruptCollectionError(SemsearchError):
    """The collection's files disagree with each other or cannot be read."""


class FormatVersionError(CorruptCollectionError):
    """The collection was written in an older on-disk format; ``semsearch upgrade`` converts it."""


class DeadlineExceededError(SemsearchError):
    """An operation ran past the deadline its caller set (see ``retriever.deadline``)."""


class AuthenticationError(SemsearchError):
    """A semsearch server (``retriever.remote``) refused the request: a missing or wrong API key, or a foreign host."""


class ServerUnreachableError(SemsearchError, ConnectionError):
    """A semsearch server (``retriever.remote``) could not be reached, or did not answer in time."""
