"""Column types that keep money exact and time in UTC on every database."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import DateTime, Numeric, String
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from tracker.core.money import decimal_to_str


class ExactDecimal(TypeDecorator):
    """Decimal stored losslessly: NUMERIC (unbounded) on PostgreSQL, canonical TEXT on SQLite.

    SQLite has no decimal type and SQLAlchemy would go through float, so the amount is kept as
    its exact decimal string; ordering by price happens in Python on Decimal values.
    """

    impl = String
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(Numeric(asdecimal=True))
        return dialect.type_descriptor(String(64))

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if isinstance(value, float):
            raise TypeError("refusing to store a float as money; pass a Decimal")
        if not isinstance(value, Decimal):
            value = Decimal(str(value))
        if dialect.name == "postgresql":
            return value
        return decimal_to_str(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        if isinstance(value, Decimal):
            return value
        return Decimal(str(value)) if not isinstance(value, float) else Decimal(repr(value))


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes in, aware UTC datetimes out, on SQLite and PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use an aware UTC datetime")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
