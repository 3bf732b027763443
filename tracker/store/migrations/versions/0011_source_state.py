"""Source state: what a source's last run left of its offers, for the next run to compare with.

Two rows per source (tracker/store/ingest/kept_state.py): `offers`, every offer's identity
and id, and `prices`, every offer's price text, currency and whether its newest span is open,
as columns of text, valid only while the run that wrote `prices` is the source's newest. A
cron-started refresh then reads back only the offers that may change something instead of
every offer's newest span. Created empty: each source's next run reads its offers back as
before and writes its rows.
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.create_table(
        "source_state",
        sa.Column("source", sa.String(64), primary_key=True),
        sa.Column("part", sa.String(16), primary_key=True),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("source_state")
