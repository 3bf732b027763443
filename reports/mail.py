"""The mail variant of the report and its delivery over SMTP.

The message is what mail clients handle well: multipart/mixed holding multipart/alternative
(a plain-text part and an HTML part whose CSS is inlined by css-inline, layout in tables, no
script), the charts as 2x PNGs related to the HTML part by Content-ID, and the week's prices
as a CSV attachment.

Deliveries are recorded in `report_delivery`: sending a week again skips the recipients who
already got it, unless forced.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from typing import TYPE_CHECKING, Any

from tracker.core.errors import InvalidInput
from tracker.core.smtp import MailError, SmtpFactory, check_addresses, send_message

if TYPE_CHECKING:
    from tracker.config.schema import Config
    from tracker.store.db import Database

log = logging.getLogger(__name__)

MAIL_WIDTH = 640


@dataclass(frozen=True)
class MailParts:
    subject: str
    html: str
    text: str
    images: dict[str, tuple[str, bytes]]  # chart id -> (content id, PNG)
    csv_name: str
    csv: bytes


@dataclass
class DeliveryResult:
    week: str
    status: str  # sent | skipped
    recipients: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    message_id: str = ""
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"week": self.week, "status": self.status, "recipients": self.recipients,
                "already_sent": self.skipped, "message_id": self.message_id,
                "note": self.note}


def content_id(chart_id: str, week: str) -> str:
    return f"{chart_id}.{week}@gpu-tracker.report"


def subject_values(document: Mapping[str, Any]) -> dict[str, str]:
    """The values `[report] subject` may name (tracker.config.checks.SUBJECT_FIELDS)."""
    from datetime import date

    week = str(document["week"])
    year, _, number = week.partition("-W")
    monday, sunday = (date.fromisocalendar(int(year), int(number), day) for day in (1, 7))
    return {"week": week, "year": year, "week_number": number, "start": monday.isoformat(),
            "end": sunday.isoformat(), "currency": str(document.get("currency", ""))}


def render_mail(document: dict[str, Any], env: Any = None, *,
                subject_template: str = "GPU prices {week}") -> MailParts:
    """Render the mail from the report document (HTML inlined, text part, PNG charts)."""
    import css_inline

    from reports import charts
    from reports.filters import summary_sentence
    from reports.render import csv_filename, environment, render_csv
    from tracker.config.checks import fill_subject

    env = env or environment()
    times = document["trends"].get("times", [])
    week = document["week"]
    images = {c["chart_id"]: (content_id(c["chart_id"], week),
                              charts.png(c, times, document["currency"]))
              for c in document["trends"]["charts"]}
    cids = {chart_id: cid for chart_id, (cid, _) in images.items()}
    csv_name = csv_filename(document)
    context = {
        "doc": document, "currency": document["currency"], "mail": True, "cids": cids,
        "svgs": {}, "csv_name": csv_name, "csv_href": csv_name, "mail_width": MAIL_WIDTH,
        "chart_width": charts.MAIL_WIDTH_PX, "chart_height": charts.MAIL_HEIGHT_PX,
    }
    html = env.get_template("mail.html").render(context)
    # Inline the stylesheet into style attributes; keep the @media (dark mode) block, which
    # cannot be inlined, and never fetch anything remote.
    inliner = css_inline.CSSInliner(keep_at_rules=True, load_remote_stylesheets=False)
    html = inliner.inline(html)
    text = env.get_template("report.txt").render(context)
    headline = summary_sentence(document["summary"]["headline"], document["currency"])
    subject = fill_subject(subject_template, subject_values(document))
    if headline and len(headline) < 140:
        subject = f"{subject}: {headline}"
    from tracker.core.secrets import scrub

    return MailParts(subject=scrub(_one_line(subject)), html=scrub(html), text=scrub(text),
                     images=images, csv_name=csv_name,
                     csv=scrub(render_csv(document)).encode("utf-8"))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def build_message(parts: MailParts, sender: str, recipients: Sequence[str],
                  now: datetime) -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = parts.subject
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message["Date"] = format_datetime(now.astimezone(UTC))
    domain = sender.rpartition("@")[2] or "gpu-tracker.local"
    message["Message-ID"] = make_msgid("gpu-report", domain=domain)
    message.set_content(parts.text)
    message.add_alternative(parts.html, subtype="html")
    html_part = next(p for p in message.iter_parts() if p.get_content_type() == "text/html")
    for chart_id, (cid, png) in sorted(parts.images.items()):
        html_part.add_related(png, maintype="image", subtype="png", cid=f"<{cid}>",
                              filename=f"{chart_id}.png", disposition="inline")
    message.add_attachment(parts.csv, maintype="text", subtype="csv",
                           filename=parts.csv_name)
    return message


# One mail per week and recipient, however many `report send` run at once: the sending
# happens under this lock (tracker/store/locks.py: a file lock beside SQLite, an advisory lock on
# PostgreSQL), which rechecks who already has the week, and a `sending` row is committed
# before the SMTP transaction starts. A sender killed mid-transaction leaves that row: its
# recipients count as served (no second copy), and `report send` says the delivery is
# unconfirmed until --force sends again.
MAIL_LOCK = "report-mail"
MAIL_LOCK_WAIT = 300.0


def delivered_recipients(db: Database, week: str) -> set[str]:
    """Who has the week's report: sent, or a send in progress (or cut off mid-transaction)."""
    return {address for status, addresses in _deliveries(db, week)
            if status in ("sent", "sending") for address in addresses}


def _deliveries(db: Database, week: str) -> list[tuple[str, list[str]]]:
    from tracker.store.report_log import week_deliveries

    return [(status, [a for a in recipients.split(",") if a])
            for status, recipients in week_deliveries(db, week)]


def record_delivery(db: Database, week: str, recipients: Sequence[str], sent_at: datetime,
                    message_id: str, status: str) -> int:
    from tracker.store.report_log import insert_delivery

    return insert_delivery(db, week, recipients, sent_at, message_id, status)


def send_weekly(
    db: Database, config: Config, week: str | None = None, *,
    recipients: Sequence[str] | None = None, force: bool = False, now: datetime | None = None,
    connect: SmtpFactory | None = None, out_dir: str | None = None,
) -> DeliveryResult:
    """Build (and archive) the week's report and mail it to the recipients that have not had
    it yet (all of them with `force`)."""
    from reports.archive import build_and_archive
    from reports.build import resolve_week

    now = now or datetime.now(UTC)
    wanted = check_addresses(recipients or config.report.recipients)
    if not wanted:
        raise InvalidInput("no recipients: pass --to or set [report] recipients")
    week_name = str(resolve_week(db, week, now))
    to_send, skipped = _pending(db, week_name, wanted, force)
    if not to_send:
        return DeliveryResult(week=week_name, status="skipped", skipped=skipped,
                              note=_unconfirmed(db, week_name))
    archived = build_and_archive(db, config, week_name, as_of=now, out_dir=out_dir)
    return _deliver(db, config, archived.document, to_send, skipped, now, connect, force=force)


def send_report(
    db: Database, config: Config, built: Any, *, recipients: Sequence[str] | None = None,
    force: bool = False, now: datetime | None = None, connect: SmtpFactory | None = None,
) -> DeliveryResult:
    """Mail an already built report (an `ArchivedReport`) to the configured recipients; what
    the scheduler's weekly job calls after `build_and_archive`. Without recipients configured
    it sends nothing and says so."""
    now = now or datetime.now(UTC)
    document = built.document
    wanted = check_addresses(recipients or config.report.recipients)
    if not wanted:
        return DeliveryResult(week=document["week"], status="skipped",
                              note="no recipients configured ([report] recipients)")
    to_send, skipped = _pending(db, document["week"], wanted, force)
    if not to_send:
        return DeliveryResult(week=document["week"], status="skipped", skipped=skipped)
    return _deliver(db, config, document, to_send, skipped, now, connect, force=force)


def _pending(db: Database, week: str, wanted: list[str],
             force: bool) -> tuple[list[str], list[str]]:
    already = delivered_recipients(db, week)
    to_send = wanted if force else [r for r in wanted if r not in already]
    return to_send, sorted(set(wanted) - set(to_send))


def _deliver(db: Database, config: Config, document: dict[str, Any], to_send: list[str],
             skipped: list[str], now: datetime, connect: SmtpFactory | None, *,
             force: bool = False) -> DeliveryResult:
    from reports.render import environment
    from tracker.store.locks import hold_locks
    from tracker.store.report_log import set_delivery_status

    if not document.get("prices", {}).get("rows"):
        from tracker.core.errors import NotFound

        raise NotFound(f"week {document['week']} has no prices; nothing was sent (run "
                       "`gpu-tracker refresh`, or pick a week with --week)")
    smtp = config.smtp.settings()
    sender = check_addresses([smtp.sender])[0]
    parts = render_mail(document, environment(config.report.templates_dir or None),
                        subject_template=config.report.subject)
    week = document["week"]
    with hold_locks(db, [MAIL_LOCK], wait=MAIL_LOCK_WAIT) as got:
        if not got.held:
            raise MailError(f"another `report send` has been mailing for over "
                            f"{MAIL_LOCK_WAIT:g} s; nothing sent")
        if not force:  # another sender may have served them while this one waited
            already = delivered_recipients(db, week)
            skipped = sorted(set(skipped) | (set(to_send) & already))
            to_send = [r for r in to_send if r not in already]
            if not to_send:
                return DeliveryResult(week=week, status="skipped", skipped=skipped,
                                      note=_unconfirmed(db, week))
        message = build_message(parts, sender, to_send, now)
        message_id = str(message["Message-ID"])
        row = record_delivery(db, week, to_send, now, message_id, "sending")
        try:
            send_message(message, smtp, sender, to_send, connect)
        except BaseException:
            set_delivery_status(db, row, "failed")
            raise
        set_delivery_status(db, row, "sent")
    return DeliveryResult(week=week, status="sent", recipients=to_send, skipped=skipped,
                          message_id=message_id)


def _unconfirmed(db: Database, week: str) -> str:
    """A note naming recipients whose delivery was cut off mid-transaction, if any."""
    cut = sorted({a for status, addresses in _deliveries(db, week) if status == "sending"
                  for a in addresses})
    if not cut:
        return ""
    return (f"the delivery to {', '.join(cut)} is unconfirmed (a sender stopped during the "
            "SMTP transaction); --force sends it again")
