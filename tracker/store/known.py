"""What the store holds offers of: the providers and regions a `--provider` or `--region`
filter can match, and the usage errors that name the ones that exist."""

from __future__ import annotations

from collections.abc import Iterable

from tracker.store.db import Database
from tracker.store.models import Offer


def known_providers(db: Database) -> list[str]:
    """Provider ids the store holds offers of (what a `--provider` filter can match)."""
    from sqlalchemy import select

    offer = Offer.__table__
    with db.engine.connect() as conn:
        return sorted(conn.execute(select(offer.c.provider).distinct()).scalars())


def check_regions(db: Database, names: Iterable[str]) -> None:
    """A `--region` no offer in the store is in is answered with the regions that exist (a
    usage error), not "(no rows)"."""
    from sqlalchemy import select

    from tracker.core.errors import usage_error

    wanted = [n for n in names if n]
    if not wanted:
        return
    offer = Offer.__table__
    with db.engine.connect() as conn:
        known = sorted(r for r in conn.execute(select(offer.c.region).distinct()).scalars() if r)
    unknown = [n for n in wanted if n not in known]
    if unknown:
        shown = ", ".join(known[:40]) + (f", ... ({len(known)} in all)" if len(known) > 40
                                         else "")
        raise usage_error(f"--region {unknown[0]!r} is in no offer in the store; regions: "
                          f"{shown or 'none yet (run `gpu-tracker refresh`)'}")


def check_providers(db: Database, names: Iterable[str], *, absent: bool = True) -> None:
    """An unknown `--provider` is answered with the providers that exist, not zero rows: a
    name no source uses is a usage error (exit 2, with the nearest names); a provider the
    tracker knows that has no offers in this store yet is not found (exit 1), unless not
    `absent`: the caller's own "no price" answer then says what the store has instead."""
    import difflib

    from tracker.core.errors import NotFound, usage_error
    from tracker.core.providers import provider_table

    wanted = [n for n in names if n]
    if not wanted:
        return
    known = known_providers(db)
    unknown = [n for n in wanted if n not in known]
    if not unknown:
        return
    listed = ", ".join(known) if known else "none yet (run `gpu-tracker refresh`)"
    name = unknown[0]
    registered = provider_table()
    if name in registered:
        if not absent:
            return
        raise NotFound(f"no offers from provider {name!r} in the store; the store has: {listed}")
    near = difflib.get_close_matches(name, sorted({*known, *registered}), n=3)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise usage_error(f"unknown provider {name!r}{hint}; the store has: {listed}")


def check_filters(db: Database, providers: Iterable[str], regions: Iterable[str]) -> None:
    """The `--provider` and `--region` filters of a question priced from the store, checked
    against what the store holds (see check_providers and check_regions); a known provider
    without offers is left to the question's "no price" answer, which lists what exists."""
    check_providers(db, providers, absent=False)
    check_regions(db, regions)
