"""Physical and sanity bounds for every quantity the tool reads, in one table.

A value outside its bound is refused where it enters: a command-line option is a usage error
(exit 2, one line, tracker/cli/commands/params.py and tracker/cli/commands/workload.py take their
limits from here), a provider row is quarantined with the bound in its reason
(tracker/store/ingest/checks.py), and a quotes or FOCUS file is refused naming the line
(scrapers/quotes.py, tracker/market/focus.py). docs/bounds.md lists the table with the reason
for each bound.

The bounds are deliberately wide: each is far beyond any real job, offer or machine
(a bound a real value could reach would be a bug), and tight enough that an input past it is
a typo or an attack (`1e30` GPUs, a price of `1e-30`), and that the arithmetic on it stays
exact and finishes. `BOUNDS` is the table docs/bounds.md is checked against
(tests/test_hardening_input.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class Bound:
    """The closed range [low, high] of one quantity (`low_open`: low itself is refused)."""

    name: str
    low: float | Decimal
    high: float | Decimal
    unit: str
    why: str
    low_open: bool = False


# -- run and plan sizes (CLI options) ---------------------------------------------------------
MAX_HOURS = 1e6  # ~114 years of wall time
MAX_GPUS = 1_000_000  # more GPUs than any cluster built so far
MAX_MONEY = Decimal("1e12")  # a trillion in any currency, per hour or upfront
MAX_MONTHS = 1200  # 100 years
MAX_TOKENS = 1e16  # ~1000x the largest published pre-training runs
MAX_ROWS = 100_000
MAX_PARAMS = 1e14  # 100 T parameters: ~50x the largest published dense or MoE model
MAX_GPUS_PER_NODE = 1024  # NVLink domains top out at 576 GPUs (NVL576); nodes at 8-72
MAX_REQUESTS_PER_DAY = 1e12  # ~100x the busiest web services' daily requests
MAX_TOKENS_PER_DAY = 1e16  # the token bound, per day
MAX_BATCH_TOKENS = 1e10  # ~150x the largest published global batches (tens of M tokens)
MAX_SEQUENCE = 100_000_000  # 100 M tokens of context: ~10x the longest published window
MAX_LAYERS = 100_000
MAX_WIDTH = 10_000_000  # hidden, MLP, head dim, vocabulary: ~100x the largest in use
MAX_CONCURRENCY = 10_000_000

# -- offers (provider rows, quotes) -----------------------------------------------------------
# A price per GPU-hour below a tenth of a cent is no offer (the cheapest real listings are
# a few cents an hour for old GPUs): a price that small is a misread unit or an attack that
# would rank first everywhere. The upper bound is ingest's long-standing absurd-price check.
MIN_PRICE_PER_GPU_HOUR = Decimal("0.001")
MAX_PRICE_PER_GPU_HOUR = Decimal(500)
MAX_GPUS_PER_OFFER = 100_000  # a reserved-cluster quote can be large; 1e30 GPUs is not one
MAX_GPU_MEMORY_GB = 4096.0  # per GPU: ~14x the largest HBM stack shipping (288 GB)
MAX_VCPUS = 100_000.0
MAX_RAM_GB = 1_000_000.0  # a petabyte of host memory
MAX_POWER_KW = 100_000.0  # 100 MW: a whole data hall, far above one quoted system
MIN_YEAR, MAX_YEAR = 2000, 2100  # dates of prices, quotes and usage lines

BOUNDS: tuple[Bound, ...] = (
    Bound("hours (run, work, deadline)", 0, MAX_HOURS, "h", "~114 years of wall time"),
    Bound("GPUs in a run or plan", 0, MAX_GPUS, "GPUs", "more than any cluster built",
          low_open=True),
    Bound("money (price, capex, opex)", 0, MAX_MONEY, "currency units", "a trillion"),
    Bound("months (horizon)", 1, MAX_MONTHS, "months", "100 years"),
    Bound("tokens (training, generation)", 0, MAX_TOKENS, "tokens",
          "~1000x the largest published pre-training runs", low_open=True),
    Bound("rows (--limit)", 1, MAX_ROWS, "rows", "a screenful is far less"),
    Bound("parameters (--params)", 0, MAX_PARAMS, "parameters",
          "~50x the largest published model", low_open=True),
    Bound("GPUs per node (--gpus-per-node)", 1, MAX_GPUS_PER_NODE, "GPUs",
          "NVLink domains reach 576 GPUs"),
    Bound("requests per day", 0, MAX_REQUESTS_PER_DAY, "requests",
          "~100x the busiest web services", low_open=True),
    Bound("output tokens per day", 0, MAX_TOKENS_PER_DAY, "tokens", "the token bound",
          low_open=True),
    Bound("global batch (--global-batch-tokens)", 0, MAX_BATCH_TOKENS, "tokens",
          "~150x the largest published global batches", low_open=True),
    Bound("sequence, context, prompt, output", 1, MAX_SEQUENCE, "tokens",
          "~10x the longest published context window"),
    Bound("layers", 1, MAX_LAYERS, "layers", "~1000x the deepest published model"),
    Bound("widths (hidden, MLP, heads, head dim, vocabulary, ranks)", 1, MAX_WIDTH, "",
          "~100x the widest in use"),
    Bound("concurrency, micro-batch", 1, MAX_CONCURRENCY, "requests or sequences",
          "far beyond one replica's memory"),
    Bound("offer price per GPU-hour", MIN_PRICE_PER_GPU_HOUR, MAX_PRICE_PER_GPU_HOUR,
          "currency units per GPU-hour",
          "the cheapest real listings are cents; the dearest tens of dollars"),
    Bound("GPUs in one offer", 0, MAX_GPUS_PER_OFFER, "GPUs",
          "a reserved-cluster quote can be large", low_open=True),
    Bound("GPU memory in an offer", 0, MAX_GPU_MEMORY_GB, "GB per GPU",
          "~14x the largest HBM shipping", low_open=True),
    Bound("vCPUs in an offer", 0, MAX_VCPUS, "vCPUs", "far beyond any host"),
    Bound("host RAM in an offer", 0, MAX_RAM_GB, "GB", "a petabyte"),
    Bound("power of a quoted system (power_kw)", 0, MAX_POWER_KW, "kW", "a data hall",
          low_open=True),
    Bound("year of a date (valid_from, usage periods)", MIN_YEAR, MAX_YEAR, "",
          "GPU cloud prices start after 2000"),
)


def number_text(value: object, limit: int = 40) -> str:
    """A number (or anything) as a short text for a message: `1E+999999999`, never the
    gigabyte of zeros its plain form would be, nor a value's whole repr."""
    if isinstance(value, Decimal):
        text = str(value) if not value.is_finite() or abs(value.adjusted()) > 30 \
            else f"{value.normalize():f}"
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
