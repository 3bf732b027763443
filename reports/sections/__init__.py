"""The report's sections, one module each, in the order the report shows them (and the
templates of the same name render them): `summary`, `key_figures` (with the new lows),
`trends`, `movers`, `spot`, `market`, `data_quality`, `prices`. The recommendations are
`tracker.answers.recommend` (an application function, as the price index prices workloads
with it too).

Each section is a function of data `reports.build` loads once (the price frames now and a
week before, the trend window's spans, the interruption bands) and returns its part of the
document; `common` holds what several sections share. Nothing here reads the clock, and only
`data_quality.load_run_history` reads the database (its runs are its alone).
"""
