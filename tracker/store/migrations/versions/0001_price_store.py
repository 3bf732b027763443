"""Price store: providers, GPU models, offers, price spans, ingest runs, rejected rows.
"""

import sqlalchemy as sa
from alembic import op

from tracker.store.types import ExactDecimal, UTCDateTime

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "provider",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("display_name", sa.String(128), nullable=False),
    )
    op.create_table(
        "gpu_model",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("vendor", sa.String(32), nullable=False),
        sa.Column("memory_gb", sa.Integer, nullable=False),
        sa.Column("form_factor", sa.String(16), nullable=False),
    )
    op.create_table(
        "offer",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("provider", sa.String(64), sa.ForeignKey("provider.id"), nullable=False),
        sa.Column("region", sa.String(64), nullable=False),
        sa.Column("zone", sa.String(64), nullable=False),
        sa.Column("instance_type", sa.String(128), nullable=False),
        sa.Column("variant", sa.String(64), nullable=False),
        sa.Column("category", sa.String(16), nullable=False),
        sa.Column("gpu_id", sa.String(64), sa.ForeignKey("gpu_model.id"), nullable=False),
        sa.Column("gpu_raw", sa.String(128), nullable=False),
        sa.Column("gpu_count", sa.Float, nullable=False),
        sa.Column("fractional", sa.Boolean, nullable=False),
        sa.Column("gpu_memory_gb", sa.Float, nullable=True),
        sa.Column("vcpus", sa.Float, nullable=True),
        sa.Column("ram_gb", sa.Float, nullable=True),
        sa.Column("source_url", sa.Text, nullable=True),
        sa.Column("attributes", sa.Text, nullable=False),
        sa.Column("first_seen", UTCDateTime(), nullable=False),
        sa.Column("latest_span_id", sa.Integer, nullable=True),
        sa.UniqueConstraint("source", "provider", "region", "zone", "instance_type", "variant",
                            "category", name="uq_offer_identity"),
    )
    op.create_index("ix_offer_source", "offer", ["source"])
    op.create_index("ix_offer_gpu_category", "offer", ["gpu_id", "category"])
    op.create_table(
        "price_span",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("offer_id", sa.Integer, sa.ForeignKey("offer.id"), nullable=False),
        sa.Column("price_per_hour", ExactDecimal(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("first_seen", UTCDateTime(), nullable=False),
        sa.Column("last_seen", UTCDateTime(), nullable=False),
        sa.Column("valid_to", UTCDateTime(), nullable=True),
        sa.Column("run_id", sa.Integer, nullable=True),
    )
    op.create_index("ix_price_span_offer_first_seen", "price_span", ["offer_id", "first_seen"])
    op.create_table(
        "ingest_run",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("version", sa.String(128), nullable=True),
        sa.Column("trigger", sa.String(32), nullable=False),
        sa.Column("host", sa.String(128), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("offers_seen", sa.Integer, nullable=False),
        sa.Column("prices_changed", sa.Integer, nullable=False),
        sa.Column("new_offers", sa.Integer, nullable=False),
        sa.Column("offers_closed", sa.Integer, nullable=False),
        sa.Column("rejected", sa.Integer, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("ix_ingest_run_source_started", "ingest_run", ["source", "started_at"])
    op.create_table(
        "rejected_row",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, nullable=True),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("raw", sa.Text, nullable=False),
        sa.Column("observed_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_rejected_row_run_id", "rejected_row", ["run_id"])


def downgrade() -> None:
    for table in ("rejected_row", "ingest_run", "price_span", "offer", "gpu_model", "provider"):
        op.drop_table(table)
