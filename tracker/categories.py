"""The pricing categories an offer can have: the one list that sources, ingest, the store
queries and the CLI's `--category` choices all use. Light on purpose (no imports)."""

CATEGORIES: tuple[str, ...] = ("on-demand", "spot", "reserved-1y", "reserved-3y", "bid", "quote")
