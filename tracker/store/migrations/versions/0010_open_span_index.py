"""Open span index, PostgreSQL only: price_span (id) WHERE valid_to IS NULL, the current prices.

Every current-price read joins each offer to its newest span (offer.latest_span_id) and keeps
the open ones. PostgreSQL's planner cannot know that an offer's newest span is nearly always
open: it takes 5% of the offers to match (the share of open spans in a year of history) and
chose a merge join over the whole primary key of price_span (888,000 entries for 47,600
rows; 0.48 s on bench/market_scale.py's store). With this partial index it hashes the open
spans instead (0.15 s with the rows sent). SQLite seeks each offer's newest span by rowid
and would not use it: there it is not created (an index every refresh keeps, for nothing).
tracker/store/series.py says which index serves what.
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_index("ix_price_span_open", "price_span", ["id"],
                        postgresql_where=sa.text("valid_to IS NULL"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_price_span_open", table_name="price_span")
