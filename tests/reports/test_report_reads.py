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


def test_the_report_sizes_each_question_once(report_db, report_config, monkeypatch):
    """The recommendations (this week, last week) and the job index (four days) ask the same
    workloads of the same shapes: each (workload, GPU, count, links) is sized once."""
    import tracker.sizing
    import tracker.sizing.serving
    from reports.build import build_report

    expected = build_report(report_db, report_config, WEEK, now=NOW)
    sized: list[object] = []
    served: list[object] = []
    size_workload, serve = tracker.sizing.size_workload, tracker.sizing.serving.serve
    monkeypatch.setattr(tracker.sizing, "size_workload",
                        lambda request: sized.append(request) or size_workload(request))
    monkeypatch.setattr(tracker.sizing.serving, "serve",
                        lambda request, *a, **k: served.append((request, a, k))
                        or serve(request, *a, **k))
    assert build_report(report_db, report_config, WEEK, now=NOW) == expected
    asked = [repr(r) for r in sized if r.gpu is not None and r.count is not None]
    assert asked and len(asked) == len(set(asked))
    # serving_options' calls (they name the cluster network), not the one-GPU notes'.
    asked_serve = [repr(call) for call in served if call[2]]
    assert asked_serve and len(asked_serve) == len(set(asked_serve))
