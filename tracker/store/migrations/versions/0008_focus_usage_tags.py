"""FOCUS usage tags: the `Tags` of each imported usage line, for budgets scoped by a tag.

Adds `tags` (a JSON object as text, `{}` for lines imported before) to `focus_usage`.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    with op.batch_alter_table("focus_usage") as batch:
        batch.add_column(sa.Column("tags", sa.Text(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("focus_usage") as batch:
        batch.drop_column("tags")
