"""Write data/focus-usage-example.csv, the demo's FOCUS cost-and-usage sample (its budget).

    python tools/focus_sample.py            # rewrites data/focus-usage-example.csv

How it is made (the file is this script's output, byte for byte): a FOCUS 1.2 cost-and-usage
export of the same fleet as data/usage-example.csv, for 1-29 November 2026 (to the end of
ISO week 48, the week the bundled prices' last snapshot, 23 November, opens): eight Azure
`Standard_NC48ads_A100_v4` VMs (2 x A100 80GB PCIe each) in eastus2, four running every day
and four more on weekdays, one line per VM per UTC day of 24 hours, at the pay-as-you-go
price the bundled snapshots carry for that VM (7.346 an hour: data/prices/SOURCES.md, a real
Retail Prices API item), so `EffectiveCost` = `BilledCost` = `ListCost` = 24 x 7.346 =
176.304 USD a line. Every line carries the FOCUS tag
`project: gpu-tracker-demo`, which the demo's budget is scoped to, and one managed-disk line a
day shows a non-GPU line being skipped. The columns are FOCUS 1.2's (data/focus-1.2.json),
with `x_InstanceType` for the VM size as tracker/market/focus.py reads it. The usage is
invented (shaped like a team's fleet); the prices are the bundled ones.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "data" / "focus-usage-example.csv"
FIRST, LAST = date(2026, 11, 1), date(2026, 11, 29)
VM_SIZE, REGION, HOURLY = "Standard_NC48ads_A100_v4", "eastus2", Decimal("7.346")
ALWAYS, WEEKDAYS = 4, 4
DISK_DAILY = Decimal("4.9152")  # a P30 managed disk: 147.46 a month / 30 (invented)
TAGS = json.dumps({"project": "gpu-tracker-demo"})
SUBSCRIPTION = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/demo"
COLUMNS = [
    "BilledCost", "BillingAccountId", "BillingCurrency", "BillingPeriodStart",
    "BillingPeriodEnd", "ChargeCategory", "ChargeDescription", "ChargePeriodStart",
    "ChargePeriodEnd", "ConsumedQuantity", "ConsumedUnit", "EffectiveCost", "ListCost",
    "ListUnitPrice", "PricingCategory", "PricingQuantity", "PricingUnit", "ProviderName",
    "PublisherName", "RegionId", "RegionName", "ResourceId", "ResourceName", "ResourceType",
    "ServiceCategory", "ServiceName", "SubAccountId", "Tags", "x_InstanceType",
]


def _stamp(day: date) -> str:
    return datetime.combine(day, datetime.min.time(), tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rows() -> list[dict[str, str]]:
    out = []
    day = FIRST
    while day <= LAST:
        running = ALWAYS + (WEEKDAYS if day.weekday() < 5 else 0)
        common = {
            "BillingAccountId": "demo-billing-account", "BillingCurrency": "USD",
            "BillingPeriodStart": "2026-11-01T00:00:00Z",
            "BillingPeriodEnd": "2026-12-01T00:00:00Z", "ChargeCategory": "Usage",
            "ChargePeriodStart": _stamp(day), "ChargePeriodEnd": _stamp(day + timedelta(days=1)),
            "ProviderName": "Microsoft", "PublisherName": "Microsoft", "RegionId": REGION,
            "RegionName": "East US 2", "SubAccountId": "demo-subscription", "Tags": TAGS}
        for vm in range(running):
            cost = str(24 * HOURLY)
            out.append({**common, "BilledCost": cost, "EffectiveCost": cost, "ListCost": cost,
                        "ChargeDescription": f"{VM_SIZE} Linux, pay as you go",
                        "ConsumedQuantity": "24", "ConsumedUnit": "Hours",
                        "ListUnitPrice": str(HOURLY), "PricingCategory": "Standard",
                        "PricingQuantity": "24", "PricingUnit": "Hours",
                        "ResourceId": f"{SUBSCRIPTION}/providers/Microsoft.Compute/"
                                      f"virtualMachines/a100-{vm}",
                        "ResourceName": f"a100-{vm}", "ResourceType": "Virtual machine",
                        "ServiceCategory": "Compute", "ServiceName": "Virtual Machines",
                        "x_InstanceType": VM_SIZE})
        out.append({**common, "BilledCost": str(DISK_DAILY), "EffectiveCost": str(DISK_DAILY),
                    "ListCost": str(DISK_DAILY), "ChargeDescription": "P30 LRS disk",
                    "ConsumedQuantity": "1", "ConsumedUnit": "Days",
                    "ListUnitPrice": str(DISK_DAILY), "PricingCategory": "Standard",
                    "PricingQuantity": "1", "PricingUnit": "Days",
                    "ResourceId": f"{SUBSCRIPTION}/providers/Microsoft.Compute/disks/data-0",
                    "ResourceName": "data-0", "ResourceType": "Disk",
                    "ServiceCategory": "Storage", "ServiceName": "Storage",
                    "x_InstanceType": ""})
        day += timedelta(days=1)
    return out


def render() -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows())
    return buffer.getvalue()


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")
