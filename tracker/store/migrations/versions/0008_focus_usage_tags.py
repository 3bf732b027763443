"""FOCUS usage tags: the `Tags` of each imported usage line, for budgets scoped by a tag.

Adds `tags` (a JSON object as text, `{}` for lines imported before) to `focus_usage`.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("focus_usage") as batch:
        batch.add_column(sa.Column("tags", sa.Text(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("focus_usage") as batch:
        batch.drop_column("tags")
