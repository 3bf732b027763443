"""The report reads the price rows once for every instant its sections ask about (issue #26):
now, a week before and the cost-per-job index's four days, where it read them six times."""

from __future__ import annotations

from tests.reports.conftest import NOW, WEEK


def test_the_report_reads_the_prices_once(report_db, report_config, monkeypatch):
    import tracker.store.queries as queries
    from reports.build import build_report

    reads: list[int] = []
    real = queries._price_rows
    monkeypatch.setattr(queries, "_price_rows",
                        lambda *a, **k: reads.append(1) or real(*a, **k))
    document = build_report(report_db, report_config, WEEK, now=NOW)
    monkeypatch.undo()
    assert document["market"]["job_index"]["jobs"]  # the job index priced from that read
    assert len(reads) == 1
    assert build_report(report_db, report_config, WEEK, now=NOW) == document
