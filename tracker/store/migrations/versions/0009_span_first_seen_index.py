"""Span first-seen index: price_span (first_seen), for the spans first seen in a window.

The report's series and any window over every offer read the spans first seen in
(since, until] as a range of this index instead of a scan of the whole span table (and the
earliest sighting is its first entry); tracker/store/series.py says which index serves what.
"""

from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    op.create_index("ix_price_span_first_seen", "price_span", ["first_seen"])


def downgrade() -> None:
    op.drop_index("ix_price_span_first_seen", table_name="price_span")
