"""Rejects once: one row per (source, row key, reason) with first/last seen and a count.

A row rejected again on the next refresh (a catalog that still lists a GPU the table does not
know) moved the reject table by one row per run; now it moves `last_seen` and `count`.
Existing rows keep their history: each becomes its own key (`id:<id>`), seen once.

Also `catalog_version`: the catalog versions (gpuhunt's `20250818-42` per provider) a source
read, with their publication time, so a catalog that stopped updating can be flagged.
"""

import sqlalchemy as sa
from alembic import op

from tracker.store.types import UTCDateTime

revision = "0004"
down_revision = "0005"  # merged after 0006 (market) and 0005 (offer network)


def upgrade() -> None:
    with op.batch_alter_table("rejected_row") as batch:
        batch.add_column(sa.Column("row_key", sa.String(255), nullable=True))
        batch.add_column(sa.Column("first_seen", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("last_seen", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("count", sa.Integer, nullable=True))
    op.execute("UPDATE rejected_row SET row_key = 'id:' || CAST(id AS VARCHAR(20)), "
               "first_seen = observed_at, last_seen = observed_at, count = 1")
    with op.batch_alter_table("rejected_row") as batch:
        batch.alter_column("row_key", existing_type=sa.String(255), nullable=False)
        batch.alter_column("first_seen", existing_type=UTCDateTime(), nullable=False)
        batch.alter_column("last_seen", existing_type=UTCDateTime(), nullable=False)
        batch.alter_column("count", existing_type=sa.Integer, nullable=False)
        batch.create_unique_constraint("uq_rejected_row_key", ["source", "row_key", "reason"])
    op.create_table(
        "catalog_version",
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("provider", sa.String(64), primary_key=True),
        sa.Column("version", sa.String(128), primary_key=True),
        sa.Column("published_at", UTCDateTime(), nullable=True),
        sa.Column("first_seen", UTCDateTime(), nullable=False),
        sa.Column("last_seen", UTCDateTime(), nullable=False),
        sa.Column("run_id", sa.Integer, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("catalog_version")
    with op.batch_alter_table("rejected_row") as batch:
        batch.drop_constraint("uq_rejected_row_key", type_="unique")
        for column in ("count", "last_seen", "first_seen", "row_key"):
            batch.drop_column(column)
