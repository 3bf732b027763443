"""The store: the database, its schema and migrations, ingest, queries, locks and job history.
Nothing above it runs SQL."""

from tracker.core.errors import register_failure_describer
from tracker.store.failures import describe_database_failure

# Importing any part of the store (the only code that runs SQL) teaches the error boundary
# the database's failures.
register_failure_describer(describe_database_failure)

