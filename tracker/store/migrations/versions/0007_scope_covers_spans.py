"""Scope covers spans: each (source, provider, region) scope time is no earlier than any
instant stored for that source's offers there.

Ingest keeps this from revision 0003 on (every snapshot raises its regions' scope to its own
time), so the newest sighting of a source is its newest scope time and an ordinary refresh
reads no `last_seen` back. Spans stored before 0003 have no scope rows: each region gets the
latest `last_seen` or `valid_to` of its spans (the time of a snapshot that listed it),
unless it already has a later one.
"""

from alembic import op

revision = "0007"
down_revision = "0004"


def upgrade() -> None:
    greatest = "GREATEST" if op.get_bind().dialect.name == "postgresql" else "max"
    # Stored instants compare in time order on both databases (SQLite: one text format).
    # SQLite parses an upsert after a SELECT only if that SELECT has a WHERE clause.
    op.execute(
        "INSERT INTO source_scope (source, provider, region, last_snapshot_at) "
        f"SELECT o.source, o.provider, o.region, max({greatest}(s.last_seen, "
        "coalesce(s.valid_to, s.last_seen))) "
        "FROM offer o JOIN price_span s ON s.offer_id = o.id WHERE true "
        "GROUP BY o.source, o.provider, o.region "
        "ON CONFLICT (source, provider, region) DO UPDATE SET last_snapshot_at = "
        f"{greatest}(source_scope.last_snapshot_at, excluded.last_snapshot_at)")


def downgrade() -> None:
    pass  # the scope times it raised are true snapshot times; nothing to undo
