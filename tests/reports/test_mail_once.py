"""One report mail per week and recipient (issue #30): concurrent `report send` processes
mail the week once, and a sender cut off mid-transaction is not followed by a second copy."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.loopback import Inbox, free_port
from tests.reports.conftest import NOW, WEEK, write_mail_config

pytest.importorskip("aiosmtpd")


class SlowInbox(Inbox):
    """Takes a second over each message, so concurrent senders overlap."""

    async def handle_DATA(self, server, session, envelope):
        await asyncio.sleep(1.0)
        return await super().handle_DATA(server, session, envelope)


@pytest.fixture
def slow_smtp():
    from aiosmtpd.controller import Controller

    inbox = SlowInbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield inbox, controller.port
    finally:
        controller.stop()


def test_three_concurrent_senders_mail_the_week_once(report_db, slow_smtp, tmp_path):
    inbox, port = slow_smtp
    config = write_mail_config(tmp_path, port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_TRACKER_")}
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = str(root)
    command = [sys.executable, "-m", "tracker", "--db", report_db.url, "--config", str(config),
               "report", "send", "--week", WEEK]
    senders = [subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [sender.communicate(timeout=240) for sender in senders]
    assert [s.returncode for s in senders] == [0, 0, 0], outputs
    statuses = sorted(out.strip() for out, _err in outputs)
    assert statuses == ["sent", "skipped", "skipped"], outputs
    assert len(inbox.messages) == 1
    assert sorted(inbox.messages[0][1]) == ["cfo@example.com", "finance@example.com"]


def test_a_send_cut_off_mid_transaction_is_not_repeated_without_force(report_db, slow_smtp,
                                                                       tmp_path):
    from reports import send_weekly
    from reports.mail import record_delivery
    from tracker.config.schema import load_config

    inbox, port = slow_smtp
    config = load_config(write_mail_config(tmp_path, port), environ={})
    # What a sender killed during the SMTP transaction leaves: its `sending` row.
    record_delivery(report_db, WEEK, ["finance@example.com"], NOW, "<cut@example.com>",
                    "sending")
    result = send_weekly(report_db, config, WEEK, now=NOW)
    assert result.status == "sent" and result.recipients == ["cfo@example.com"]
    assert result.skipped == ["finance@example.com"]
    again = send_weekly(report_db, config, WEEK, now=NOW)
    assert again.status == "skipped" and "unconfirmed" in again.note
    assert "finance@example.com" in again.note and "--force" in again.note
    assert len(inbox.messages) == 1
