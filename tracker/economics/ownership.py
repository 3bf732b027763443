"""Rent vs buy: monthly on-prem cost against a cloud price at a utilization
(docs/economics.md §1.3).

    power        = kW × power factor × PUE × $/kWh × hours per month
    colo         = kW (contracted) × $/kW-month
    opex         = power + colo + staff + other
    cloud        = utilization × hours per month × cloud price per hour (same GPUs)
    net          = cloud − opex                          (what owning saves each month)
    payback      = capex / net                           (simple, months; None when net ≤ 0)
    disc. payback= first month m with −capex + Σ_{t≤m} net/(1+r_m)^t ≥ 0
    NPV          = −capex + Σ_{t=1..H} net/(1+r_m)^t + residual/(1+r_m)^H,  r_m = (1+r)^(1/12) − 1
    breakeven u  = (capex − PV(residual) + opex·A) / (price × hours × A),  A = Σ_{t=1..H} (1+r_m)^−t
                   (= (capex − residual + opex·H)/(price·hours·H) undiscounted), so NPV(u*) = 0
    IRR          = the monthly rate where NPV = 0; annual = (1 + monthly)^12 − 1
    owned $/GPU-h= (capex − PV(residual) + opex·A) / (utilization × hours × GPUs × A)

Capex is at t = 0 (undiscounted, numpy-financial's convention); monthly flows at month ends.
Everything is Decimal; only the IRR is a float (a rate found by root search).

A moving market (`cloud_price_trend` g, a fraction per year, negative when prices fall): the
rental alternative in month t costs cloud · m_t, m_t = (1+g)^((t−1)/12) (month 1 at today's
price), so with A_g = Σ_{t=1..H} m_t (1+r_m)^−t in place of A for the cloud side:

    NPV          = −capex + cloud·A_g − opex·A + residual/(1+r_m)^H
    breakeven u  = (capex − PV(residual) + opex·A) / (price × hours × A_g)
    payback      = the (fractional) month where Σ_{t≤m} (cloud·m_t − opex) reaches capex

g = 0 takes the flat formulas above unchanged, so it reproduces them to the last digit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, overload

from tracker.core.errors import InvalidInput
from tracker.economics import finance
from tracker.economics.units import fraction, positive


@dataclass(frozen=True, slots=True)
class OwnershipInputs:
    """Every input is explicit here; defaults come from data/economics.json via
    `tracker.economics.defaults.EconomicsSettings.ownership_inputs`."""

    capex: Decimal
    power_kw: Decimal
    cloud_price_per_hour: Decimal  # for the same number of GPUs as the capex buys
    utilization: Decimal
    horizon_months: int
    gpus: Decimal
    pue: Decimal
    kwh_price: Decimal
    colo_per_kw_month: Decimal
    staff_per_month: Decimal
    other_opex_per_month: Decimal
    residual_fraction: Decimal
    discount_rate: Decimal  # per year
    hours_per_month: Decimal
    power_factor: Decimal
    cloud_price_trend: Decimal = Decimal(0)  # per year, compound; -0.25 = falling 25% a year

    def validate(self) -> None:
        positive(self.capex, "capex", allow_zero=True)
        positive(self.power_kw, "power (kW)", allow_zero=True)
        positive(self.cloud_price_per_hour, "cloud price per hour", allow_zero=True)
        fraction(self.utilization, "utilization")
        if self.horizon_months < 1:
            raise InvalidInput(f"horizon must be at least 1 month, got {self.horizon_months}")
        positive(self.gpus, "GPU count")
        positive(self.pue, "PUE")
        if self.pue < 1:
            raise InvalidInput(f"PUE must be at least 1, got {self.pue}")
        positive(self.kwh_price, "electricity price", allow_zero=True)
        positive(self.colo_per_kw_month, "colocation price", allow_zero=True)
        positive(self.staff_per_month, "staff cost", allow_zero=True)
        positive(self.other_opex_per_month, "other opex", allow_zero=True)
        fraction(self.residual_fraction, "residual fraction", allow_zero=True)
        if self.discount_rate <= -1:
            raise InvalidInput(f"discount rate must be more than -1, got {self.discount_rate}")
        positive(self.hours_per_month, "hours per month")
        if self.hours_per_month > 744:
            raise InvalidInput(
                f"hours per month cannot exceed 744 (31 days), got {self.hours_per_month}")
        fraction(self.power_factor, "power factor", allow_zero=True)
        if not MIN_TREND < self.cloud_price_trend <= MAX_TREND:
            raise InvalidInput(f"cloud price trend must be more than {MIN_TREND:.0%} and at "
                               f"most +{MAX_TREND:.0%} a year, got "
                               f"{float(self.cloud_price_trend):+.1%}")


MIN_TREND = Decimal(-1)  # a price cannot fall 100% a year and stay a price
MAX_TREND = Decimal(1)  # +100% a year: beyond any rental market so far
# The trend row of the sensitivity table, per year: H100 on-demand list prices fell by more
# than half from 2024 to 2026 (docs/economics.md §7: $2.85 early 2024 to $1.70 Oct 2025 on
# the secondary summaries, AWS p5 -44% on 2025-06-05 in data/prices/), i.e. about -30% to -40%
# a year at the steepest; +10% covers a shortage like the 2023 one.
TREND_RANGE = (Decimal("-0.40"), Decimal("0.10"))
TREND_POINTS = tuple(Decimal(x) for x in ("-0.40", "-0.30", "-0.20", "-0.10", "0", "0.10"))
_MAX_PAYBACK_MONTHS = 1200  # 100 years: a payback search past the horizon stops here

@dataclass(frozen=True, slots=True)
class OwnershipResult:
    capex: Decimal
    residual_value: Decimal
    monthly_power: Decimal
    monthly_colo: Decimal
    monthly_staff: Decimal
    monthly_other_opex: Decimal
    monthly_onprem_opex: Decimal  # = power + colo + staff + other
    monthly_cloud_cost: Decimal
    monthly_net_saving: Decimal
    monthly_discount_rate: Decimal
    payback_months: Decimal | None
    discounted_payback_month: int | None
    breakeven_utilization: Decimal | None
    npv: Decimal
    irr_monthly: float | None
    irr_annual: float | None
    owned_cost_per_gpu_hour: Decimal
    cash_flows: tuple[Decimal, ...]
    warnings: tuple[str, ...] = field(default=())
    cloud_price_trend: Decimal = Decimal(0)
    last_monthly_cloud_cost: Decimal | None = None  # month H's, on a trend; else = monthly


def cloud_multiplier(trend: Decimal, month: int) -> Decimal:
    """m_t = (1+g)^((t−1)/12): month `month`'s cloud price as a multiple of today's."""
    if trend == 0 or month == 1:
        return Decimal(1)
    return (1 + trend) ** (Decimal(month - 1) / 12)


def cloud_annuity(trend: Decimal, rate: Decimal, months: int) -> Decimal:
    """A_g = Σ_{t=1..months} m_t (1+r)^−t; the plain annuity factor when the trend is 0."""
    if trend == 0:
        return finance.annuity_factor(rate, months)
    return sum((cloud_multiplier(trend, t) * finance.discount_factor(rate, t)
                for t in range(1, months + 1)), Decimal(0))

def monthly_power_cost(i: OwnershipInputs) -> Decimal:
    return i.power_kw * i.power_factor * i.pue * i.kwh_price * i.hours_per_month


def monthly_opex(i: OwnershipInputs) -> Decimal:
    colo = i.power_kw * i.colo_per_kw_month
    return monthly_power_cost(i) + colo + i.staff_per_month + i.other_opex_per_month


def monthly_cloud_cost(i: OwnershipInputs) -> Decimal:
    return i.utilization * i.hours_per_month * i.cloud_price_per_hour


def breakeven_utilization(i: OwnershipInputs) -> Decimal | None:
    """The utilization at which buying and renting have equal NPV over the horizon.

    May exceed 1 (buying does not pay within the horizon even at 100 %); None when the cloud
    price is zero.
    """
    rate = finance.monthly_rate(i.discount_rate)
    annuity = finance.annuity_factor(rate, i.horizon_months)
    denominator = i.cloud_price_per_hour * i.hours_per_month * cloud_annuity(
        i.cloud_price_trend, rate, i.horizon_months)
    if denominator == 0:
        return None
    residual_pv = i.capex * i.residual_fraction * finance.discount_factor(rate, i.horizon_months)
    return (i.capex - residual_pv + monthly_opex(i) * annuity) / denominator


def discounted_payback_month(capex: Decimal, net: Decimal, rate: Decimal) -> int | None:
    """First whole month whose cumulative discounted savings cover capex; None if never."""
    if capex <= 0:
        return 0
    if net <= 0:
        return None
    if rate == 0:
        months = capex / net
        whole = int(months)
        return whole if whole == months else whole + 1
    need = 1 - capex * rate / net  # v^m must fall to this
    if need <= 0:
        return None  # even a perpetuity of `net` is worth less than capex
    guess = max(1, math.ceil(math.log(float(need)) / math.log(1.0 / (1.0 + float(rate)))))

    def covered(m: int) -> bool:
        return net * finance.annuity_factor(rate, m) >= capex

    while guess > 1 and covered(guess - 1):
        guess -= 1
    while not covered(guess):
        guess += 1
    return guess


def evaluate(i: OwnershipInputs) -> OwnershipResult:
    i.validate()
    if i.cloud_price_trend != 0:
        return _evaluate_trend(i)
    rate = finance.monthly_rate(i.discount_rate)
    annuity = finance.annuity_factor(rate, i.horizon_months)
    horizon_factor = finance.discount_factor(rate, i.horizon_months)
    power = monthly_power_cost(i)
    opex = monthly_opex(i)
    cloud = monthly_cloud_cost(i)
    net = cloud - opex
    residual = i.capex * i.residual_fraction
    payback = i.capex / net if net > 0 else None
    flows = [-i.capex] + [net] * i.horizon_months
    flows[-1] += residual
    npv = -i.capex + net * annuity + residual * horizon_factor
    irr_m = finance.irr(flows)
    owned, breakeven, warnings = _owned_and_breakeven(i, residual, horizon_factor, opex, annuity)
    if net <= 0:
        warnings.append("the cloud costs less per month than running the hardware: no payback")
    return OwnershipResult(
        capex=i.capex, residual_value=residual, monthly_power=power,
        monthly_colo=i.power_kw * i.colo_per_kw_month, monthly_staff=i.staff_per_month,
        monthly_other_opex=i.other_opex_per_month, monthly_onprem_opex=opex,
        monthly_cloud_cost=cloud, monthly_net_saving=net, monthly_discount_rate=rate,
        payback_months=payback,
        discounted_payback_month=discounted_payback_month(i.capex, net, rate),
        breakeven_utilization=breakeven, npv=npv, irr_monthly=irr_m,
        irr_annual=finance.annualize(irr_m), owned_cost_per_gpu_hour=owned,
        cash_flows=tuple(flows), warnings=tuple(warnings),
    )


def _owned_and_breakeven(i: OwnershipInputs, residual: Decimal, horizon_factor: Decimal,
                         opex: Decimal, annuity: Decimal
                         ) -> tuple[Decimal, Decimal | None, list[str]]:
    """What both evaluations share: the owned cost per GPU-hour used, the breakeven
    utilization, and the warning when even full use does not pay back."""
    used_gpu_hours = i.utilization * i.hours_per_month * i.gpus * annuity
    owned = (i.capex - residual * horizon_factor + opex * annuity) / used_gpu_hours
    warnings: list[str] = []
    breakeven = breakeven_utilization(i)
    if breakeven is not None and breakeven > 1:
        warnings.append(
            f"buying does not pay back within {i.horizon_months} months even at 100% "
            "utilization")
    return owned, breakeven, warnings


def _evaluate_trend(i: OwnershipInputs) -> OwnershipResult:
    """`evaluate` with the cloud price moving by `cloud_price_trend` a year (module docstring).
    The paybacks are searched month by month past the horizon (up to 100 years)."""
    g = i.cloud_price_trend
    rate = finance.monthly_rate(i.discount_rate)
    annuity = finance.annuity_factor(rate, i.horizon_months)
    horizon_factor = finance.discount_factor(rate, i.horizon_months)
    opex = monthly_opex(i)
    cloud = monthly_cloud_cost(i)
    residual = i.capex * i.residual_fraction
    nets = [cloud * cloud_multiplier(g, t) - opex for t in range(1, i.horizon_months + 1)]
    flows = [-i.capex, *nets]
    flows[-1] += residual
    npv = -i.capex + cloud * cloud_annuity(g, rate, i.horizon_months) - opex * annuity \
        + residual * horizon_factor
    irr_m = finance.irr(flows)
    owned, breakeven, warnings = _owned_and_breakeven(i, residual, horizon_factor, opex, annuity)
    payback, discounted = _trend_paybacks(i.capex, cloud, opex, g, rate)
    turn = next((t for t, net in enumerate(nets, start=1) if net <= 0), None)
    if turn == 1:
        warnings.append("the cloud costs less per month than running the hardware: no payback")
    elif turn is not None:
        warnings.append(f"with cloud prices moving {float(g):+.0%} a year, renting costs less "
                        f"per month than running the hardware from month {turn}")
    return OwnershipResult(
        capex=i.capex, residual_value=residual, monthly_power=monthly_power_cost(i),
        monthly_colo=i.power_kw * i.colo_per_kw_month, monthly_staff=i.staff_per_month,
        monthly_other_opex=i.other_opex_per_month, monthly_onprem_opex=opex,
        monthly_cloud_cost=cloud, monthly_net_saving=nets[0], monthly_discount_rate=rate,
        payback_months=payback, discounted_payback_month=discounted,
        breakeven_utilization=breakeven, npv=npv, irr_monthly=irr_m,
        irr_annual=finance.annualize(irr_m), owned_cost_per_gpu_hour=owned,
        cash_flows=tuple(flows), warnings=tuple(warnings), cloud_price_trend=g,
        last_monthly_cloud_cost=cloud * cloud_multiplier(g, i.horizon_months))


def _trend_paybacks(capex: Decimal, cloud: Decimal, opex: Decimal, g: Decimal,
                    rate: Decimal) -> tuple[Decimal | None, int | None]:
    """(simple payback months, fractional; first month the discounted savings cover capex)
    with the cloud price on its trend; None when it never happens within 100 years."""
    if capex <= 0:
        return Decimal(0), 0
    simple: Decimal | None = None
    discounted: int | None = None
    total = present = Decimal(0)
    for t in range(1, _MAX_PAYBACK_MONTHS + 1):
        net = cloud * cloud_multiplier(g, t) - opex
        if net <= 0 and g < 0:
            break  # a falling price only falls further: no later month saves anything
        if simple is None:
            if net > 0 and total + net >= capex:
                simple = Decimal(t - 1) + (capex - total) / net
            total += net
        present += net * finance.discount_factor(rate, t)
        if present >= capex:
            discounted = t
            break
    return simple, discounted


# Verdict ----------------------------------------------------------------------------------------

NEVER = "never"  # buying does not pay within the horizon even at 100 % utilization
ALWAYS = "always"  # buying pays even at 0 % utilization (e.g. a negative discount rate)


def bound_utilization(u: Decimal | None) -> tuple[Decimal | None, str | None]:
    """A breakeven utilization as a reader can use it: (u, None) inside (0, 1], else
    (None, 'never') above 100 % and (None, 'always') at or below 0 %."""
    if u is None:
        return None, None
    if u > 1:
        return None, NEVER
    if u <= 0:
        return None, ALWAYS
    return u, None


def verdict(i: OwnershipInputs, r: OwnershipResult) -> str:
    """'buy' when buying has a positive NPV at the stated utilization, else 'rent'."""
    return "buy" if r.npv > 0 else "rent"


def payback_within(months: Decimal | int | None, horizon_months: int) -> bool:
    """Whether a payback (simple months or discounted month) falls inside the horizon."""
    return months is not None and months <= horizon_months


@overload
def clamp_share(u: Decimal) -> Decimal: ...
@overload
def clamp_share(u: None) -> None: ...
@overload
def clamp_share(u: Decimal | None) -> Decimal | None: ...
def clamp_share(u: Decimal | None) -> Decimal | None:
    """A utilization clamped to [0, 1] (for ranking sensitivity swings)."""
    if u is None:
        return None
    return min(Decimal(1), max(Decimal(0), u))


# Sensitivity ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Range:
    """Low/high for one input: absolute values, or multipliers of the base ('relative')."""

    low: Decimal
    high: Decimal
    relative: bool = False


@dataclass(frozen=True, slots=True)
class SensitivityRow:
    input: str
    base: Decimal
    low: Decimal
    high: Decimal
    breakeven_low: Decimal | None
    breakeven_high: Decimal | None
    swing: Decimal | None


SENSITIVE_INPUTS = (
    "capex", "cloud_price_per_hour", "pue", "kwh_price", "colo_per_kw_month",
    "staff_per_month", "residual_fraction", "discount_rate", "horizon_months", "power_factor",
    "cloud_price_trend",
)


def sensitivity(i: OwnershipInputs, ranges: dict[str, Range]) -> list[SensitivityRow]:
    """Tornado table: each input at its low and high with the others at base, the breakeven
    utilization at each, sorted by the size of the swing (largest first).

    Absolute ranges are widened to include the base value, so the base is always inside.
    """
    rows: list[SensitivityRow] = []
    for name, bounds in ranges.items():
        if name not in SENSITIVE_INPUTS:
            raise InvalidInput(f"no sensitivity for {name!r}; known: {', '.join(SENSITIVE_INPUTS)}")
        base = Decimal(getattr(i, name))
        if bounds.relative:
            low, high = base * bounds.low, base * bounds.high
        else:
            low, high = min(bounds.low, base), max(bounds.high, base)
        if name == "horizon_months":
            low, high = Decimal(max(1, int(low))), Decimal(max(1, int(high)))
        results = []
        for value in (low, high):
            # name is one of SENSITIVE_INPUTS (checked above), all Decimal but the int months.
            override: dict[str, Any] = {
                name: int(value) if name == "horizon_months" else value}
            changed = replace(i, **override)
            results.append(breakeven_utilization(changed))
        swing = None
        if results[0] is not None and results[1] is not None:
            # Beyond 0-100 % the answer is 'never'/'always'; a swing past the bounds is no
            # more decision than reaching them.
            swing = abs(clamp_share(results[1]) - clamp_share(results[0]))
        rows.append(SensitivityRow(name, base, low, high, results[0], results[1], swing))
    rows.sort(key=lambda r: (r.swing is None, -(r.swing or 0), r.input))
    return rows


# Owned cost per GPU-hour of a hardware quote ----------------------------------------------------

@dataclass(frozen=True, slots=True)
class OwnedCost:
    """What one used GPU-hour of owned hardware costs, part by part (all per GPU-hour).

        capex  = capex / (life months × hours per month × utilization × GPUs)   (straight line)
        power  = kW × power factor × PUE × $/kWh × hours / (hours × utilization × GPUs)
        colo   = kW × $/kW-month / (hours × utilization × GPUs)
        staff  = staff per month / (hours × utilization × GPUs);  other likewise
        total  = capex + power + colo + staff + other

    Power, colo and staff are paid every month whether the GPUs are busy or not, so every part
    is divided by the used GPU-hours. It is `evaluate(...).owned_cost_per_gpu_hour` with no
    discounting and no residual over a horizon equal to the life.
    """

    capex: Decimal
    power: Decimal
    colo: Decimal
    staff: Decimal
    other: Decimal
    total: Decimal
    utilization: Decimal
    life_months: int


def owned_cost(i: OwnershipInputs, life_months: int) -> OwnedCost:
    """The owned cost per used GPU-hour of `i` (its capex, power and opex, at its utilization)
    with straight-line depreciation over `life_months`."""
    if life_months < 1:
        raise InvalidInput(f"hardware life must be at least 1 month, got {life_months}")
    i.validate()
    used = i.utilization * i.hours_per_month * i.gpus  # used GPU-hours per month
    capex = i.capex / (life_months * used)
    power = monthly_power_cost(i) / used
    colo = i.power_kw * i.colo_per_kw_month / used
    staff = i.staff_per_month / used
    other = i.other_opex_per_month / used
    return OwnedCost(capex, power, colo, staff, other, capex + power + colo + staff + other,
                     i.utilization, life_months)
