"""The mail variant, sent to a real SMTP server on loopback (aiosmtpd)."""

from __future__ import annotations

import email
import re
from email import policy

import pytest
from click.testing import CliRunner

from tests.loopback import free_port, smtp_inbox
from tests.reports.conftest import EVIL_PROVIDER, NOW, WEEK, active_markup, write_mail_config

pytest.importorskip("aiosmtpd")


@pytest.fixture
def smtp_server():
    with smtp_inbox(b"reporter", b"s3cret") as server:
        yield server


@pytest.fixture
def mail_config(tmp_path, smtp_server):
    """Config with [smtp] pointing at the loopback server; the password comes from the
    environment, as it should in production."""
    import reports  # noqa: F401
    from tracker.config.schema import load_config

    _, port = smtp_server
    path = write_mail_config(tmp_path, port, user="reporter")
    return load_config(path, environ={"GPU_TRACKER_SMTP_PASSWORD": "s3cret"})


def _parts(message):
    return [(part.get_content_type(), part) for part in message.walk()]


def test_mail_structure_cid_images_text_part_and_recipients(report_db, mail_config,
                                                            smtp_server):
    from reports import send_weekly

    inbox, _ = smtp_server
    result = send_weekly(report_db, mail_config, WEEK, now=NOW)
    assert result.status == "sent"
    assert result.recipients == ["cfo@example.com", "finance@example.com"]
    assert len(inbox.messages) == 1
    mail_from, rcpt_tos, raw = inbox.messages[0]
    assert mail_from == "gpu-tracker@example.com"
    assert sorted(rcpt_tos) == ["cfo@example.com", "finance@example.com"]

    message = email.message_from_bytes(raw, policy=policy.default)
    assert message["To"] == "cfo@example.com, finance@example.com"
    assert message["Subject"].startswith("GPU prices 2026-W48")
    assert message["Message-ID"] == result.message_id
    # mixed( alternative( text, related( html, png x3 ) ), csv )
    assert message.get_content_type() == "multipart/mixed"
    top = list(message.iter_parts())
    assert [p.get_content_type() for p in top] == ["multipart/alternative", "text/csv"]
    alternative = list(top[0].iter_parts())
    assert [p.get_content_type() for p in alternative] == ["text/plain", "multipart/related"]
    related = list(alternative[1].iter_parts())
    assert [p.get_content_type() for p in related] == ["text/html"] + ["image/png"] * 3

    text = alternative[0].get_content()
    assert "GPU prices fell this week" in text
    assert EVIL_PROVIDER in text  # plain text shows the string as it is

    html = related[0].get_content()
    assert active_markup(html) == []
    assert "&lt;script&gt;" in html  # in text; in attributes (alt) a quoted "<" is inert
    assert "<svg" not in html  # mail gets PNGs, not SVG
    assert 'style="' in html and "@media (prefers-color-scheme: dark)" in html
    assert 'role="presentation"' in html
    cids_in_html = set(re.findall(r'src="cid:([^"]+)"', html))
    image_cids = {p["Content-ID"].strip("<>") for p in related[1:]}
    assert cids_in_html == image_cids == {
        "trend-h100-sxm.2026-W48@gpu-tracker.report", "trend-a100-80gb.2026-W48@gpu-tracker.report",
        "trend-l40s.2026-W48@gpu-tracker.report"}
    for image in related[1:]:
        png = image.get_content()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 1280
    alts = re.findall(r'<img[^>]+alt="([^"]+)"', html)
    assert len(alts) == 3 and all("cheapest" in alt for alt in alts)

    attachment = top[1]
    assert attachment.get_filename() == "gpu-prices-2026-W48.csv"
    csv_text = attachment.get_content()
    assert csv_text.splitlines()[0].startswith("gpu,gpu_name,provider,region")
    assert "'=HYPERLINK" in csv_text


def test_rerun_does_not_send_twice_without_force(report_db, mail_config, smtp_server):
    from reports import send_weekly

    inbox, _ = smtp_server
    assert send_weekly(report_db, mail_config, WEEK, now=NOW).status == "sent"
    again = send_weekly(report_db, mail_config, WEEK, now=NOW)
    assert (again.status, again.skipped) == ("skipped",
                                             ["cfo@example.com", "finance@example.com"])
    assert len(inbox.messages) == 1
    # A new recipient gets it; the others are not sent it twice.
    more = send_weekly(report_db, mail_config, WEEK, now=NOW,
                       recipients=["finance@example.com", "ops@example.com"])
    assert (more.status, more.recipients, more.skipped) == (
        "sent", ["ops@example.com"], ["finance@example.com"])
    assert inbox.messages[-1][1] == ["ops@example.com"]
    forced = send_weekly(report_db, mail_config, WEEK, now=NOW, force=True)
    assert forced.status == "sent" and len(inbox.messages) == 3


def test_cli_send_and_list(report_db, mail_config, smtp_server, tmp_path):
    from tracker.cli.main import cli

    inbox, _ = smtp_server
    config_path = mail_config.path
    env = {"GPU_TRACKER_SMTP_PASSWORD": "s3cret"}
    runner = CliRunner()
    args = ["--db", report_db.url, "--config", str(config_path), "report", "send",
            "--week", WEEK, "--to", "board@example.com"]
    first = runner.invoke(cli, args, env=env, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() == "sent"
    second = runner.invoke(cli, args, env=env, catch_exceptions=False)
    assert second.exit_code == 0 and second.stdout.strip() == "skipped"
    assert "already sent" in second.stderr and "--force" in second.stderr
    assert len(inbox.messages) == 1
    forced = runner.invoke(cli, [*args, "--force"], env=env, catch_exceptions=False)
    assert forced.stdout.strip() == "sent" and len(inbox.messages) == 2

    listed = runner.invoke(cli, ["--db", report_db.url, "--config", str(config_path),
                                 "report", "list", "--format", "json"], env=env)
    assert listed.exit_code == 0, listed.output
    import json

    rows = json.loads(listed.stdout)
    assert rows[0]["week"] == "2026-W48"
    assert rows[0]["sent_to"] == "board@example.com"
    assert rows[0]["html"].endswith("2026-W48/gpu-report-2026-W48.html")


def test_wrong_password_fails_and_is_not_recorded_as_sent(report_db, mail_config, smtp_server):
    from reports import send_weekly
    from reports.mail import delivered_recipients
    from tracker.config.schema import load_config
    from tracker.core.smtp import MailError

    bad = load_config(mail_config.path, environ={"GPU_TRACKER_SMTP_PASSWORD": "nope"})
    with pytest.raises(MailError, match="login refused"):
        send_weekly(report_db, bad, WEEK, now=NOW)
    assert delivered_recipients(report_db, WEEK) == set()
    assert send_weekly(report_db, mail_config, WEEK, now=NOW).status == "sent"


def test_unreachable_server_is_one_clear_error(report_db, mail_config):
    from reports import send_weekly
    from tracker.core.smtp import MailError

    mail_config.smtp.port = free_port()  # nothing listens there
    with pytest.raises(MailError, match=r"cannot send via 127\.0\.0\.1"):
        send_weekly(report_db, mail_config, WEEK, now=NOW)


def test_scheduler_path_without_recipients_sends_nothing(report_db, report_config, tmp_path):
    from reports import build_and_archive, send_report

    report_config.report.recipients = []
    built = build_and_archive(report_db, report_config, WEEK, as_of=NOW, out_dir=tmp_path)
    result = send_report(report_db, report_config, built, now=NOW)
    assert result.status == "skipped" and "no recipients" in result.note


def test_bad_addresses_and_missing_host(report_db, report_config):
    from reports import send_weekly
    from tracker.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="not an e-mail address"):
        send_weekly(report_db, report_config, WEEK, now=NOW, recipients=["finance"])
    with pytest.raises(InvalidInput, match=r"\[smtp\] host"):
        send_weekly(report_db, report_config, WEEK, now=NOW)
