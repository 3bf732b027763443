"""Operations: spot interruption facts, job history, report archive and deliveries.
"""

import sqlalchemy as sa
from alembic import op

from tracker.store.types import UTCDateTime

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "spot_interruption",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("region", sa.String(64), nullable=False),
        sa.Column("instance_type", sa.String(128), nullable=False),
        sa.Column("os", sa.String(16), nullable=False),
        sa.Column("band", sa.Integer, nullable=False),
        sa.Column("band_label", sa.String(32), nullable=False),
        sa.Column("min_pct", sa.Float, nullable=False),
        sa.Column("max_pct", sa.Float, nullable=True),
        sa.Column("savings_pct", sa.Float, nullable=True),
        sa.Column("as_of", UTCDateTime(), nullable=False),
        sa.Column("last_seen", UTCDateTime(), nullable=False),
        sa.Column("run_id", sa.Integer, nullable=True),
    )
    op.create_index("ix_spot_interruption_key", "spot_interruption",
                    ["provider", "region", "instance_type", "as_of"])
    op.create_table(
        "job_run",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("job", sa.String(64), nullable=False),
        sa.Column("trigger", sa.String(32), nullable=False),
        sa.Column("host", sa.String(128), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("ix_job_run_job_started", "job_run", ["job", "started_at"])
    op.create_table(
        "report_archive",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("week", sa.String(10), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("week", "kind", name="uq_report_week_kind"),
    )
    op.create_table(
        "report_delivery",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("week", sa.String(10), nullable=False),
        sa.Column("recipients", sa.Text, nullable=False),
        sa.Column("sent_at", UTCDateTime(), nullable=False),
        sa.Column("message_id", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
    )
    op.create_index("ix_report_delivery_week", "report_delivery", ["week"])


def downgrade() -> None:
    for table in ("report_delivery", "report_archive", "job_run", "spot_interruption"):
        op.drop_table(table)
