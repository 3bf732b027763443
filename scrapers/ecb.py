"""The European Central Bank's euro foreign exchange reference rates.

The ECB publishes on each TARGET business day (around 16:00 CET) how many units of ~30
currencies one euro buys. The XML files share one envelope: `<Cube><Cube time="YYYY-MM-DD">
<Cube currency="USD" rate="1.0163"/>...` with one dated cube per business day:
`eurofxref-daily.xml` (today), `eurofxref-hist-90d.xml` (90 days, the default) and
`eurofxref-hist.xml` (since 1999). No key. Rates are parsed as exact Decimals.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from xml.etree import ElementTree

from scrapers.base import ExchangeRateFact, Record, Rejected, Source
from scrapers.http import HttpClient
from tracker.core.errors import SourceError

HIST_90D_URL = "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-hist-90d.xml"


def parse_ecb_xml(text: str | bytes) -> Iterator[ExchangeRateFact | Rejected]:
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise SourceError(f"ecb: response is not XML: {exc}") from None
    days = 0
    for cube in root.iter():
        if not cube.tag.endswith("Cube") or "time" not in cube.attrib:
            continue
        days += 1
        try:
            day = date.fromisoformat(cube.attrib["time"])
        except ValueError:
            yield Rejected(f"bad date {cube.attrib['time']!r}", dict(cube.attrib))
            continue
        for item in cube:
            currency = item.attrib.get("currency", "").strip().upper()
            try:
                rate = Decimal(item.attrib.get("rate", "").strip())
            except InvalidOperation:
                yield Rejected(f"bad rate for {currency or '?'}", dict(item.attrib))
                continue
            if len(currency) != 3 or not rate.is_finite() or rate <= 0:
                yield Rejected("currency or rate out of range", dict(item.attrib))
                continue
            yield ExchangeRateFact(currency=currency, rate_date=day, rate=rate)
    if days == 0:
        raise SourceError("ecb: no dated <Cube time=...> in the response")


class EcbSource(Source):
    name = "ecb"
    description = "ECB euro foreign exchange reference rates (daily, for --currency)"
    DEFAULTS = {"url": HIST_90D_URL}

    def fetch(self, client: HttpClient, fetched_at: datetime) -> Iterator[Record]:
        yield from parse_ecb_xml(client.get_bytes(self.settings["url"]))
