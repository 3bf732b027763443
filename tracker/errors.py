"""Typed errors of the library; the CLI turns each into one line and an exit code."""


class TrackerError(Exception):
    """Base class: a problem the user can act on, described in one line."""


class NotFound(TrackerError):
    """A named thing (GPU, model, source, offer, price) does not exist."""


class InvalidInput(TrackerError):
    """An input value is malformed or out of range."""


class DatabaseError(TrackerError):
    """The database cannot be opened, migrated or written."""


class SourceError(TrackerError):
    """A price source failed: HTTP error, malformed response, limits exceeded."""


class MissingCredentials(SourceError):
    """A source needs a key from the environment and it is not set."""
