"""Alembic environment: always run programmatically from tracker.store.db with a live connection."""

from alembic import context

from tracker.store.models import SQLModel

target_metadata = SQLModel.metadata
connection = context.config.attributes["connection"]
context.configure(
    connection=connection, target_metadata=target_metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
