"""Mail over SMTP, for every sender (the weekly report, the price alerts): plain address
checks and handing a message to the configured server (`[smtp]`: host, port, security
starttls|tls|none, user, password, timeout). Rendering what is sent is the sender's own
(reports/mail.py for the report).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import parseaddr
from typing import Any

from tracker.core.errors import InvalidInput, TrackerError

SECURITY_MODES = ("starttls", "tls", "none")


@dataclass(frozen=True, slots=True)
class SmtpSettings:
    """The `[smtp]` section as a sender takes it; its defaults are the configuration's
    (tracker/config/sections.py `SmtpSection` declares them from these)."""

    host: str = ""  # empty: no mail
    port: int = 587
    security: str = "starttls"  # one of SECURITY_MODES
    user: str = ""
    password: str = ""
    sender: str = "gpu-tracker@localhost"
    timeout: float = 30.0


class MailError(TrackerError):
    """The SMTP server refused the message or could not be reached."""


def check_addresses(addresses: Iterable[str]) -> list[str]:
    """Plain `user@host` addresses, deduplicated and sorted; one clear error otherwise."""
    result = set()
    for raw in addresses:
        for part in str(raw).split(","):
            part = part.strip()
            if not part:
                continue
            _, address = parseaddr(part)
            if not address or "@" not in address or any(c in address for c in "\r\n<> "):
                raise InvalidInput(f"not an e-mail address: {part!r}")
            result.add(address)
    return sorted(result)


SmtpFactory = Callable[[SmtpSettings], Any]


def _connect(smtp: SmtpSettings) -> Any:
    import smtplib
    import ssl

    host = smtp.host
    if not host:
        raise InvalidInput("no SMTP server configured: set [smtp] host (or GPU_TRACKER_SMTP_HOST)")
    security = smtp.security.lower()
    if security not in SECURITY_MODES:
        raise InvalidInput(f"[smtp] security must be one of {', '.join(SECURITY_MODES)}, "
                           f"got {security!r}")
    port, timeout = smtp.port, smtp.timeout
    context = ssl.create_default_context()
    client: smtplib.SMTP  # SMTP_SSL is a subclass
    if security == "tls":
        client = smtplib.SMTP_SSL(host, port, timeout=timeout, context=context)
    else:
        client = smtplib.SMTP(host, port, timeout=timeout)
    try:
        client.ehlo()
        if security == "starttls":
            client.starttls(context=context)
            client.ehlo()
        if smtp.user:
            client.login(smtp.user, smtp.password)
    except BaseException:
        client.close()
        raise
    return client


def send_message(message: EmailMessage, smtp: SmtpSettings, sender: str,
                 recipients: Sequence[str], connect: SmtpFactory | None = None) -> None:
    """Hand the message to the SMTP server; every recipient must be accepted."""
    import smtplib  # here, not at the top: the configuration reads SmtpSettings at every load
    import ssl

    connect = connect or _connect
    try:
        client = connect(smtp)
        try:
            refused = client.send_message(message, from_addr=sender, to_addrs=list(recipients))
        finally:
            try:
                client.quit()
            except (smtplib.SMTPException, OSError):
                client.close()
    except smtplib.SMTPAuthenticationError as exc:
        raise MailError(f"SMTP login refused by {smtp.host}: {exc.smtp_code}") from None
    except smtplib.SMTPRecipientsRefused as exc:
        raise MailError(f"SMTP server refused every recipient: "
                        f"{', '.join(sorted(exc.recipients))}") from None
    except (smtplib.SMTPException, ssl.SSLError, OSError) as exc:
        raise MailError(f"cannot send via {smtp.host}:{smtp.port}: "
                        f"{type(exc).__name__}: {exc}") from None
    if refused:
        raise MailError(f"SMTP server refused: {', '.join(sorted(refused))}")
