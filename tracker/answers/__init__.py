"""The application layer: one function per question, joining the store and the pure engines.

- `pricing`: the prices a question needs, looked up in the store as of a date;
- `candidates`: the sweep of candidate runs (GPU x count x stored offer), sized and priced;
- `documents`: the answers (cost, spot, breakeven, compare, serving) as the JSON documents the
  CLI prints and the report embeds, with the unrounded values a human table is drawn from.

The interfaces (tracker/cli/commands, tracker/cli/scheduler.py, reports/) call these and print; the
engines (tracker/sizing, tracker/economics) never import them (tests/test_layers.py).
"""
