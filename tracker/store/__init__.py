"""The store: the database, its schema and migrations, ingest, queries, locks and job history.
Nothing above it runs SQL."""
