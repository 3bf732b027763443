"""Defaults of the economics engine: `data/economics.json`, overridden by the config file.

The JSON holds every default with its source and reliability; the `[economics]` config
section (tracker/config/sections.py, scalar keys also from GPU_TRACKER_ECONOMICS_<KEY>) starts from
`config_defaults()`;
`EconomicsSettings(config.economics_values())` resolves the effective values, remembering which
ones were overridden so outputs can say where each assumption came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from functools import cache
from typing import Any

from tracker.core.data_files import read_json
from tracker.core.errors import InvalidInput
from tracker.economics.cost import BillingRule
from tracker.economics.ownership import OwnershipInputs, Range
from tracker.economics.units import dec

SECTION = "economics"

# Scalar defaults kept as decimal strings in the config layer (exact; env values are strings).
DECIMAL_KEYS = (
    "hours_per_month", "pue", "kwh_price", "colo_per_kw_month", "staff_per_node_month",
    "other_opex_per_month", "residual_fraction", "horizon_months", "discount_rate",
    "networking_per_gpu", "power_factor", "gpus_per_node", "fail_fraction", "slot_utilization",
    "cloud_price_multiplier", "capex_multiplier", "owned_utilization",
)
# The scalar defaults that are amounts of money: stated in a currency, converted (never
# relabelled) when the answer is in another one.
MONEY_KEYS = frozenset({"kwh_price", "colo_per_kw_month", "staff_per_node_month",
                        "other_opex_per_month", "networking_per_gpu"})
SPOT_BAND_KEYS = {
    "spot_band_conversion": "conversion", "spot_band_window_hours": "window_hours",
    "spot_band_point": "point", "spot_band_open_top_pct": "open_top_pct",
}


@cache
def catalog() -> dict[str, Any]:
    """The bundled data/economics.json (numbers as Decimal), with the per-provider facts from
    the provider registry (data/providers.json) in the shape the engine reads: `billing`,
    `spot.notice_seconds` and `spot.default_mtti_hours`, each keyed by provider id."""
    from tracker.core.providers import provider_defaults, provider_table

    data = read_json("economics.json", parse_float=Decimal)
    fallback = provider_defaults()
    data["billing"] = {"default": fallback["billing"]}
    data["spot"]["notice_seconds"] = {}
    data["spot"]["default_mtti_hours"] = {"default": fallback["spot_mtti_hours"]}
    for pid, provider in provider_table().items():
        if provider.billing is not None:
            data["billing"][pid] = provider.billing
        if provider.spot_notice_seconds is not None:
            data["spot"]["notice_seconds"][pid] = provider.spot_notice_seconds
        if provider.spot_mtti_hours is not None:
            data["spot"]["default_mtti_hours"][pid] = provider.spot_mtti_hours
    return data


def config_defaults() -> dict[str, Any]:
    """The `[economics]` section as the config layer sees it (flat, plus provider tables)."""
    data = catalog()
    values: dict[str, Any] = {"currency": data["currency"]}
    for key in DECIMAL_KEYS:
        values[key] = str(data["defaults"][key]["value"])
    band = data["spot"]["advisor_band"]
    for key, field_name in SPOT_BAND_KEYS.items():
        values[key] = str(band[field_name])
    values["capex_per_gpu"] = {g: str(v["value"]) for g, v in data["capex_per_gpu"].items()}
    values["node_power_kw"] = {
        g: {"kw": str(v["value"]), "gpus": int(v["gpus"])} for g, v in data["node_power_kw"].items()
    }
    values["billing"] = {
        p: {"granularity_seconds": int(v["granularity_seconds"]),
            "minimum_seconds": int(v["minimum_seconds"])}
        for p, v in data["billing"].items()
    }
    spot = data["spot"]
    values["notice_seconds"] = {p: int(v["value"]) for p, v in spot["notice_seconds"].items()}
    values["mtti_hours"] = {p: str(v["value"]) for p, v in spot["default_mtti_hours"].items()}
    values["max_runtime_hours"] = {
        k: str(v["value"]) for k, v in spot["max_runtime_hours"].items()}
    return values


@dataclass(frozen=True)
class Assumption:
    name: str
    value: Decimal | str
    source: str


class EconomicsSettings:
    """Effective economics settings: JSON defaults < config file / environment."""

    def __init__(self, section: dict[str, Any] | None = None) -> None:
        base = config_defaults()
        self._base = base
        merged = dict(base)
        for key, value in (section or {}).items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                inner = dict(merged[key])
                inner.update(value)
                merged[key] = inner
            else:
                merged[key] = value
        self._values = merged
        # Set by in_currency: the currency the amounts are shown in, and units of it per
        # unit of each currency an amount is stated in.
        self._shown_in: str | None = None
        self._rates: dict[str, Decimal] = {}

    # Scalars ------------------------------------------------------------------------------

    def value(self, key: str) -> Decimal:
        if key not in DECIMAL_KEYS:
            raise KeyError(key)
        number = dec(self._values[key], f"[economics] {key}")
        if key in MONEY_KEYS:
            return self._converted(number, default=not self.overridden(key))
        return number

    def integer(self, key: str) -> int:
        number = self.value(key)
        if number != number.to_integral_value():
            raise InvalidInput(f"[economics] {key} must be a whole number, got {number}")
        return int(number)

    @property
    def currency(self) -> str:
        """The currency of every amount these settings give."""
        from tracker.core.money import check_currency

        return check_currency(self._shown_in or str(self._values["currency"]))

    def _stated_currency(self, *, default: bool) -> str:
        """The bundled defaults' amounts are in data/economics.json's currency; amounts the
        configuration sets are in `[economics] currency`."""
        return str(catalog()["currency"] if default else self._values["currency"]).upper()

    def stated_currencies(self) -> set[str]:
        """The currencies the amounts are stated in (before in_currency)."""
        stated = {self._stated_currency(default=not self.overridden(k)) for k in MONEY_KEYS}
        stated |= {self._stated_currency(default=self._capex_is_default(g))
                   for g in self._values["capex_per_gpu"]}
        return stated

    def in_currency(self, currency: str, rates: dict[str, Decimal]) -> EconomicsSettings:
        """These settings with every amount in `currency`: `rates` holds the units of
        `currency` per unit of each stated currency (the ECB rate of the question's day)."""
        converted = EconomicsSettings.__new__(EconomicsSettings)
        converted._base, converted._values = self._base, self._values
        converted._shown_in = currency
        converted._rates = {**rates, currency: Decimal(1)}
        return converted

    def _converted(self, amount: Decimal, *, default: bool) -> Decimal:
        if self._shown_in is None:
            return amount
        return amount * self._rates[self._stated_currency(default=default)]

    def overridden(self, key: str) -> bool:
        return str(self._values.get(key)) != str(self._base.get(key))

    def source(self, key: str) -> str:
        """Where a default comes from (the config file when it was overridden there)."""
        if self.overridden(key):
            return "config [economics]"
        entry = catalog()["defaults"].get(key)
        if entry is None:
            return ""
        return f"{entry['source']} ({entry['reliability']})"


    # Ranges for the sensitivity table -------------------------------------------------------

    def sensitivity_ranges(self) -> dict[str, Range]:
        from tracker.economics.ownership import TREND_RANGE

        d = catalog()["defaults"]

        def absolute(key: str) -> Range:
            low, high = (Decimal(x) for x in d[key]["range"])
            if key in MONEY_KEYS:  # the bundled range is in the bundled currency
                low, high = (self._converted(x, default=True) for x in (low, high))
            return Range(low, high)

        def relative(key: str) -> Range:
            low, high = d[key]["range"]
            base = Decimal(d[key]["value"])
            return Range(Decimal(low) / base, Decimal(high) / base, relative=True)

        return {
            "capex": relative("capex_multiplier"),
            "cloud_price_per_hour": relative("cloud_price_multiplier"),
            "pue": absolute("pue"),
            "kwh_price": absolute("kwh_price"),
            "colo_per_kw_month": absolute("colo_per_kw_month"),
            "staff_per_month": relative("staff_per_node_month"),
            "residual_fraction": absolute("residual_fraction"),
            "discount_rate": absolute("discount_rate"),
            "horizon_months": absolute("horizon_months"),
            "power_factor": absolute("power_factor"),
            # Not a default (the trend is 0 unless asked), so its range is the engine's.
            "cloud_price_trend": Range(*TREND_RANGE),
        }

    # Hardware -----------------------------------------------------------------------------

    def capex_per_gpu(self, gpu: str) -> Decimal | None:
        value = self._values["capex_per_gpu"].get(gpu)
        if value is None:
            return None
        return self._converted(dec(value, f"[economics.capex_per_gpu] {gpu}"),
                               default=self._capex_is_default(gpu))

    def _capex_is_default(self, gpu: str) -> bool:
        entry = catalog()["capex_per_gpu"].get(gpu)
        return entry is not None and str(entry["value"]) == str(
            self._values["capex_per_gpu"].get(gpu))

    def capex_gpus(self) -> list[str]:
        return sorted(self._values["capex_per_gpu"])

    def capex_source(self, gpu: str) -> str:
        entry = catalog()["capex_per_gpu"].get(gpu)
        if entry is None or not self._capex_is_default(gpu):
            return "config [economics.capex_per_gpu]"
        return f"{entry['basis']}; {entry['source']} ({entry['reliability']})"

    def power_kw_per_gpu(self, gpu: str) -> Decimal | None:
        entry = self._values["node_power_kw"].get(gpu)
        if entry is None:
            return None
        return dec(entry["kw"], f"[economics.node_power_kw] {gpu}") / int(entry["gpus"])

    def power_gpus(self) -> list[str]:
        return sorted(self._values["node_power_kw"])

    def power_source(self, gpu: str) -> str:
        entry = catalog()["node_power_kw"].get(gpu)
        if entry is None:
            return "config [economics.node_power_kw]"
        return f"{entry['value']} kW per {entry['gpus']}-GPU node: {entry['source']}"

    # Providers ----------------------------------------------------------------------------

    def billing(self, provider: str | None) -> tuple[BillingRule, str]:
        table = self._values["billing"]
        key = (provider or "").lower()
        entry = table.get(key) or table["default"]
        try:
            rule = BillingRule(int(entry.get("granularity_seconds", 1)),
                               int(entry.get("minimum_seconds", 0)))
        except (TypeError, ValueError, AttributeError):
            raise InvalidInput(
                f"[economics.billing.{key or 'default'}] needs whole-second "
                "granularity_seconds and minimum_seconds") from None
        source_entry = catalog()["billing"].get(key if key in table else "default")
        source = source_entry["source"] if source_entry else "config [economics.billing]"
        return rule, source

    def notice_seconds(self, provider: str | None) -> int | None:
        value = self._values["notice_seconds"].get((provider or "").lower())
        return None if value is None else int(value)

    def notice_providers(self) -> list[str]:
        return sorted(self._values["notice_seconds"])

    def default_mtti_hours(self, provider: str | None) -> tuple[float, str]:
        table = self._values["mtti_hours"]
        key = (provider or "").lower()
        key = key if key in table else "default"
        entry = catalog()["spot"]["default_mtti_hours"].get(key)
        source = entry["source"] if entry else "config [economics.mtti_hours]"
        return float(dec(table[key], f"[economics.mtti_hours] {key}")), source

    def band_settings(self) -> tuple[str, float, str, float]:
        """(conversion, window hours, point, open-top %) for Spot Advisor bands."""
        v = self._values
        return (
            str(v["spot_band_conversion"]),
            float(dec(v["spot_band_window_hours"], "[economics] spot_band_window_hours")),
            str(v["spot_band_point"]),
            float(dec(v["spot_band_open_top_pct"], "[economics] spot_band_open_top_pct")),
        )


    def max_runtime_hours(self, kind: str) -> float | None:
        value = self._values["max_runtime_hours"].get(kind)
        return None if value is None else float(dec(value, f"[economics.max_runtime_hours] {kind}"))

    # Building engine inputs -----------------------------------------------------------------

    def nodes_for(self, gpus: Decimal | float | int) -> int:
        """Nodes needed for `gpus` at gpus_per_node (ceil), at least one."""
        per_node = self.value("gpus_per_node")
        count = dec(gpus, "GPU count")
        whole = (count / per_node).to_integral_value(rounding=ROUND_CEILING)
        return max(1, int(whole))

    def ownership_inputs(
        self, *, capex: Decimal, power_kw: Decimal, cloud_price_per_hour: Decimal,
        utilization: Decimal, gpus: Decimal, **given: Any,
    ) -> OwnershipInputs:
        """OwnershipInputs with every input not in `given` (or given as None) from the defaults.

        Staff defaults to staff_per_node_month × nodes (gpus / gpus_per_node, rounded up).
        """
        def pick(key: str, default: Decimal) -> Decimal:
            value = given.get(key)
            return default if value is None else dec(value, key.replace("_", " "))

        staff = pick("staff_per_month", self.value("staff_per_node_month") * self.nodes_for(gpus))
        horizon = given.get("horizon_months")
        return OwnershipInputs(
            capex=dec(capex, "capex"), power_kw=dec(power_kw, "power (kW)"),
            cloud_price_per_hour=dec(cloud_price_per_hour, "cloud price per hour"),
            utilization=dec(utilization, "utilization"),
            horizon_months=self.integer("horizon_months") if horizon is None else int(horizon),
            gpus=dec(gpus, "GPU count"),
            pue=pick("pue", self.value("pue")),
            kwh_price=pick("kwh_price", self.value("kwh_price")),
            colo_per_kw_month=pick("colo_per_kw_month", self.value("colo_per_kw_month")),
            staff_per_month=staff,
            other_opex_per_month=pick("other_opex_per_month", self.value("other_opex_per_month")),
            residual_fraction=pick("residual_fraction", self.value("residual_fraction")),
            discount_rate=pick("discount_rate", self.value("discount_rate")),
            hours_per_month=pick("hours_per_month", self.value("hours_per_month")),
            power_factor=pick("power_factor", self.value("power_factor")),
        )
