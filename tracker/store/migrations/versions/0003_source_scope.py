"""Source scope: when each source last listed each provider's region.

An open span's last sighting becomes the later of its own `last_seen` and this time, so a
refresh of unchanged prices writes one row per region instead of one per offer.
"""

import sqlalchemy as sa
from alembic import op

from tracker.store.types import UTCDateTime

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_table(
        "source_scope",
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("provider", sa.String(64), primary_key=True),
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("last_snapshot_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("source_scope")
