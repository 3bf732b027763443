"""Collection: running sources now (refresh) or over their past catalogs (backfill) into the
store."""
