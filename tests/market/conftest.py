"""The alert peers on loopback, shared by the alert tests: a real SMTP server (aiosmtpd) that
takes the `alerter` login, and a webhook that answers `ok` at the Slack-shaped path."""

from __future__ import annotations

import pytest

from tests.loopback import LoopbackServer, Reply, smtp_inbox

SMTP_PASSWORD = "s3cret-smtp-pw"
HOOK_TOKEN = "T000/B000/XXXXhooktoken"
HOOK_PATH = f"/services/{HOOK_TOKEN}"


@pytest.fixture
def smtp_server():
    with smtp_inbox(b"alerter", SMTP_PASSWORD.encode()) as server:
        yield server


@pytest.fixture
def hook():
    with LoopbackServer() as server:
        server.route(HOOK_PATH, Reply(b"ok", content_type="text/plain"))
        yield server
