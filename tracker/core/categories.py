"""The pricing categories an offer can have: the one list that sources, ingest, the store
queries and the CLI's `--category` choices all use. Light on purpose (no imports)."""

CATEGORIES: tuple[str, ...] = ("on-demand", "spot", "reserved-1y", "reserved-3y", "bid", "quote")

OWNED = "owned"
RENTAL = "rental"
QUOTE_CATEGORY = "quote"  # a hardware quote: priced as owned, not rented


def ownership_of(category: str) -> str:
    """'owned' for a hardware quote, 'rental' for everything rented by the hour."""
    return OWNED if category == QUOTE_CATEGORY else RENTAL
