"""Market intelligence: ECB exchange rates, alert state and history, FOCUS usage rows.
"""

import sqlalchemy as sa
from alembic import op

from tracker.store.types import ExactDecimal, UTCDateTime

revision = "0006"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "exchange_rate",
        sa.Column("currency", sa.String(3), primary_key=True),
        sa.Column("rate_date", sa.String(10), primary_key=True),
        sa.Column("rate", ExactDecimal(), nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("fetched_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "alert_state",
        sa.Column("rule", sa.String(128), primary_key=True),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("since", UTCDateTime(), nullable=True),
        sa.Column("checked_at", UTCDateTime(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
    )
    op.create_table(
        "alert_event",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("rule", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("delivered", sa.Text(), nullable=False),
    )
    op.create_index("ix_alert_event_rule_at", "alert_event", ["rule", "at"])
    op.create_table(
        "focus_usage",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("file_sha256", sa.String(64), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("region", sa.String(64), nullable=False),
        sa.Column("sku_id", sa.String(255), nullable=False),
        sa.Column("resource_id", sa.Text(), nullable=False),
        sa.Column("instance_type", sa.String(128), nullable=False),
        sa.Column("gpu_id", sa.String(64), nullable=False),
        sa.Column("gpu_count", sa.Float(), nullable=False),
        sa.Column("pricing_category", sa.String(32), nullable=False),
        sa.Column("charge_period_start", UTCDateTime(), nullable=False),
        sa.Column("charge_period_end", UTCDateTime(), nullable=False),
        sa.Column("usage_hours", sa.Float(), nullable=False),
        sa.Column("effective_cost", ExactDecimal(), nullable=False),
        sa.Column("billing_currency", sa.String(3), nullable=False),
        sa.Column("imported_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("file_sha256", "line", name="uq_focus_usage_file_line"),
    )
    op.create_index("ix_focus_usage_file_sha256", "focus_usage", ["file_sha256"])


def downgrade() -> None:
    op.drop_index("ix_focus_usage_file_sha256", table_name="focus_usage")
    op.drop_table("focus_usage")
    op.drop_index("ix_alert_event_rule_at", table_name="alert_event")
    op.drop_table("alert_event")
    op.drop_table("alert_state")
    op.drop_table("exchange_rate")
