"""Offer network: the link inside an instance and the cluster fabric between instances.

Adds node_link, node_link_gbps, cluster_network, cluster_gbps and network_note to `offer`
and fills them for the offers already stored, from the same lookup ingest uses for new ones
(tracker.core.fabric.offer_network over data/fabric.json; docs/fabric.md has the sources).
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0006"  # after main's market schema (0006), so the chain stays linear

_COLUMNS = ("node_link", "node_link_gbps", "cluster_network", "cluster_gbps", "network_note")


def upgrade() -> None:
    with op.batch_alter_table("offer") as batch:
        batch.add_column(sa.Column("node_link", sa.String(32), nullable=True))
        batch.add_column(sa.Column("node_link_gbps", sa.Float(), nullable=True))
        batch.add_column(sa.Column("cluster_network", sa.String(32), nullable=True))
        batch.add_column(sa.Column("cluster_gbps", sa.Float(), nullable=True))
        batch.add_column(sa.Column("network_note", sa.Text(), nullable=True))

    from tracker.core.fabric import offer_network

    conn = op.get_bind()
    offers = conn.execute(sa.text(
        "SELECT id, provider, instance_type, gpu_id, gpu_count, attributes FROM offer")).all()
    updates = []
    for row in offers:
        try:
            attributes = json.loads(row.attributes or "{}")
        except ValueError:
            attributes = {}
        net = offer_network(row.provider, row.instance_type, row.gpu_id, row.gpu_count,
                            attributes)
        updates.append({"id": row.id, **net.to_json()})
    if updates:
        conn.execute(sa.text(
            "UPDATE offer SET node_link = :node_link, node_link_gbps = :node_link_gbps, "
            "cluster_network = :cluster_network, cluster_gbps = :cluster_gbps, "
            "network_note = :network_note WHERE id = :id"), updates)


def downgrade() -> None:
    with op.batch_alter_table("offer") as batch:
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
