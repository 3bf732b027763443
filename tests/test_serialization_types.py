"""to_jsonable answers plain values by their exact type first (a document's bulk, issue #26's
50,000-offer report): the same JSON form as the general path it skips, kept here as the
oracle, for nested data of every kind it meets (and subclasses, which take that path)."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from tracker.core.money import decimal_to_str
from tracker.core.serialization import iso_utc, to_jsonable


def general(value):
    if isinstance(value, Decimal):
        return decimal_to_str(value) if value.is_finite() else None
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, date):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: general(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): general(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [general(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Kind(enum.StrEnum):
    A = "a"


@dataclasses.dataclass
class Point:
    x: float
    when: datetime


leaves = st.one_of(
    st.text(max_size=5), st.integers(), st.booleans(), st.none(),
    st.floats(allow_nan=True, allow_infinity=True), st.decimals(allow_nan=True),
    st.datetimes(timezones=st.just(UTC)), st.dates(), st.just(Kind.A),
    st.builds(Point, st.floats(allow_nan=False), st.datetimes(timezones=st.just(UTC))))
trees = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), inner, max_size=4)),
    max_leaves=30)


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


@given(trees)
def test_the_exact_type_path_gives_the_general_form(value):
    assert same(to_jsonable(value), general(value))
