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


# -- the report's document: one walk, each distinct string scrubbed once ------------------------

json_trees = st.recursive(
    st.one_of(st.text(max_size=6), st.integers(), st.booleans(), st.none(),
              st.floats(allow_nan=True, allow_infinity=True)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=4)),
    max_leaves=40)


@given(json_trees)
def test_canonical_json_is_the_standard_encoders_bytes(value):
    import json

    from tracker.core.serialization import canonical_json

    assert canonical_json(value) == json.dumps(value, sort_keys=True, indent=2,
                                               ensure_ascii=False) + "\n"


@given(json_trees)
def test_dumps_is_the_standard_encoders_bytes(value):
    """dumps lays out as canonical_json does, keys in their order (issue #26: `compare`'s
    5,000 rows printed through the C encoder)."""
    import json

    from tracker.core.serialization import dumps, to_jsonable

    assert dumps(value) == json.dumps(to_jsonable(value), indent=2, ensure_ascii=False)


def test_dumps_keeps_the_keys_order_and_the_standard_encoders_rules():
    import json
    from decimal import Decimal

    from tracker.core.serialization import dumps

    rows = [{"z": 1, "a": [], "m": {"y": None, "b": [1.5, "é"]}, "p": Decimal("2.50")},
            {"n": float("nan"), "i": float("inf"), "t": (1, True)}, [], {}]
    assert dumps(rows) == json.dumps(
        [{"z": 1, "a": [], "m": {"y": None, "b": [1.5, "é"]}, "p": "2.5"},
         {"n": None, "i": None, "t": [1, True]}, [], {}], indent=2, ensure_ascii=False)
    assert dumps({1: "a", "b": {2: []}}) == json.dumps({"1": "a", "b": {"2": []}}, indent=2)
    assert dumps("x") == '"x"' and dumps([]) == "[]"


def test_canonical_json_with_keys_that_are_not_strings_follows_the_standard_encoder():
    import json

    from tracker.core.serialization import canonical_json

    value = {"rows": [{1: "a", 2: [], 3: {"y": None}}, {True: 1}], "é": "ü\n\"", "n": {}}
    assert canonical_json(value) == json.dumps(value, sort_keys=True, indent=2,
                                               ensure_ascii=False) + "\n"


def test_a_document_scrubs_each_distinct_string_once(monkeypatch):
    """850,000 strings of a 50,000-offer report are 87,000 distinct ones (issue #26)."""
    from tracker.core import secrets
    from tracker.core.serialization import versioned_document

    seen: list[str] = []
    scrub = secrets.scrub

    def counting(text):
        seen.append(text)
        return scrub(text)

    monkeypatch.setattr(secrets, "scrub", counting)
    rows = [{"provider": "aws", "region": "us-east-1", "price": Decimal("2.5"),
             "seen": datetime(2026, 11, 30, tzinfo=UTC)} for _ in range(100)]
    document = versioned_document("test", 1, {"rows": rows})
    assert document["rows"][99] == {"provider": "aws", "region": "us-east-1", "price": "2.5",
                                    "seen": "2026-11-30T00:00:00Z"}
    # The keys are scrubbed too (a key can carry a secret), each distinct one once.
    keys = {"schema_version", "kind", "rows", "provider", "region", "price", "seen"}
    assert sorted(seen) == sorted({"test", "aws", "us-east-1", "2.5", "2026-11-30T00:00:00Z",
                                   *keys})


def test_a_document_masks_secrets_in_every_string_it_holds_or_makes():
    """A learned secret is masked in strings, and in the text of a number or a time too (a
    short password as a whole token), as when the JSON form was scrubbed after it was made."""
    from tracker.core import secrets
    from tracker.core.serialization import versioned_document

    secrets.learn(["sk-test-0123456789abcdef"])
    secrets.learn(["2026"], short=True)
    try:
        document = versioned_document("test", 1, {
            "error": ["x", "bad key sk-test-0123456789abcdef", "x"],
            "when": datetime(2026, 11, 30, tzinfo=UTC), "day": date(2026, 11, 30),
            "price": Decimal("2026"), "point": Point(1.0, datetime(2026, 1, 2, tzinfo=UTC)),
            "enum": Kind.A, "pairs": ("bad key sk-test-0123456789abcdef", 1)})
    finally:
        secrets.forget_all()
    assert document == {
        "schema_version": 1, "kind": "test", "error": ["x", "bad key ***", "x"],
        "when": "***-11-30T00:00:00Z", "day": "***-11-30", "price": "***",
        "point": {"x": 1.0, "when": "***-01-02T00:00:00Z"}, "enum": "a",
        "pairs": ["bad key ***", 1]}
