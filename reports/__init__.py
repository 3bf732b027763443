"""The weekly report: build a versioned JSON document from the store, render it (HTML, mail,
plain text, CSV), archive it and send it.

`build_and_archive` is what the CLI, the demo and the scheduler call; `send_report` mails a
built report to the configured recipients (the scheduler's weekly job), `send_weekly` builds
and mails (`gpu-tracker report send`). Heavy libraries (pandas, matplotlib, css-inline) are
imported inside the functions, so importing this package is cheap.
"""

from __future__ import annotations

from reports.archive import ArchivedReport, build_and_archive, list_archived
from reports.mail import DeliveryResult, send_report, send_weekly

__all__ = ["ArchivedReport", "DeliveryResult", "build_and_archive", "list_archived",
           "send_report", "send_weekly"]
