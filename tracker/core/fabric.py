"""What an offer's network is: the link between its GPUs and the fabric between its instances.

Pure lookup, no database: `offer_network(provider, instance_type, gpu_id, gpu_count,
attributes)` returns the `Network` that ingest stores with a new offer. Fill order:

1. a raw fact the provider's own data carried (`attributes`): AWS's price-list
   "Network Performance" (`network_performance`, e.g. "3200 Gigabit") sets the bandwidth of
   an instance family known to have EFA;
2. the first matching row of `data/fabric.json` (provider × instance-type pattern, each row
   with its source; facts in docs/fabric.md);
3. nothing known: no cluster network, and the link inside the instance taken from the GPU
   (data/gpus.json: NVLink generation from its link rate for SXM parts, PCIe otherwise).

`cluster_network` None means instances of this offer are independent hosts for one job: a
plan never spans them unless the user overrides it (`[fabric]` config, `--allow-unclustered`).
Also here: the achievable bus bandwidth of each link kind (`collective_ratios`), fitted to the
nccl-tests measurements in docs/fabric.md §3.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from tracker.core.data_files import read_json
from tracker.core.errors import InvalidInput

NETWORK_JSON_KEYS = ("node_link", "node_link_gbps", "cluster_network", "cluster_gbps",
                     "network_note")
CLUSTER_KINDS = ("efa", "infiniband", "roce", "tcpx", "tcpxo", "tcp")
LINK_KINDS = ("nvlink2", "nvlink3", "nvlink4", "nvlink5", "nvlink-bridge", "xgmi", "pcie")
# Plain TCP between hosts that have no cluster fabric, used only when the user overrides the
# rule: AWS caps a non-EFA flow at 10 Gb/s inside a cluster placement group (docs/fabric.md
# §2.5); a marketplace host's uplink is rarely better.
UNCLUSTERED_GBPS = 10.0
_AWS_GIGABIT = re.compile(r"(\d+(?:\.\d+)?)\s*x?\s*(\d+)?\s*gigabit", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Network:
    """An offer's links. Bandwidths: node_link_gbps in GB/s per GPU, one direction (NVLink
    450 on H100); cluster_gbps in Gb/s per instance, all NICs (3,200 on p5.48xlarge)."""

    node_link: str | None
    node_link_gbps: float | None
    cluster_network: str | None
    cluster_gbps: float | None
    network_note: str

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in NETWORK_JSON_KEYS}

    @property
    def clustered(self) -> bool:
        return self.cluster_network is not None and bool(self.cluster_gbps)


@dataclass(frozen=True, slots=True)
class _Family:
    provider: str
    pattern: re.Pattern[str]
    node_link: str | None
    node_link_gbps: float | None
    cluster_network: str | None
    cluster_gbps: float | None
    summary: str
    source: str
    scale_up_domain: int | None = None  # GPUs in one NVLink fabric across instances (NVL72)


@dataclass(frozen=True, slots=True)
class CollectiveRatios:
    """Achievable bus bandwidth over the link's one-direction rate (nccl-tests busbw)."""

    allreduce: float
    gather: float  # all-gather, reduce-scatter, point-to-point
    nvls: bool
    source: str


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return read_json("fabric.json")


@lru_cache(maxsize=1)
def families() -> tuple[_Family, ...]:
    out = []
    for row in _table()["families"]:
        out.append(_Family(
            provider=row["provider"], pattern=re.compile(row["match"], re.IGNORECASE),
            node_link=row["node_link"], node_link_gbps=row["node_link_gbps"],
            cluster_network=row["cluster_network"], cluster_gbps=row["cluster_gbps"],
            summary=row["summary"], source=row["source"],
            scale_up_domain=row.get("scale_up_domain")))
    return tuple(out)


@lru_cache(maxsize=16)
def collective_ratios(kind: str | None) -> CollectiveRatios:
    """Bus-bandwidth ratios of a link kind ('network' for the fabric between nodes)."""
    table = _table()["collectives"]
    row = table.get(kind or "pcie") or table["pcie"]
    return CollectiveRatios(float(row["allreduce_busbw_ratio"]),
                            float(row["gather_busbw_ratio"]), bool(row["nvls"]), row["source"])


def family_of(provider: str, instance_type: str) -> _Family | None:
    for fam in families():
        if fam.provider == provider and fam.pattern.search(instance_type):
            return fam
    return None


def instance_providers(instance_type: str) -> list[str]:
    """The providers whose own instance families in data/fabric.json name this instance type
    (p5.48xlarge: aws); the rows that match every name of a provider ('.') name none."""
    return sorted({fam.provider for fam in families()
                   if fam.pattern.pattern != "." and fam.pattern.search(instance_type)})


@lru_cache(maxsize=4096)
def offer_scale_up_domain(provider: str, instance_type: str) -> int | None:
    """GPUs in the NVLink domain an offer's instances belong to when it spans instances (an
    NVL72 rack of 4-GPU VMs: 72), from data/fabric.json; None: the instance is the domain."""
    fam = family_of(provider, instance_type)
    return fam.scale_up_domain if fam is not None else None


@lru_cache(maxsize=256)
def gpu_link(gpu_id: str) -> tuple[str, float]:
    """(kind, GB/s per GPU one direction) of the GPU's own link, from data/gpus.json."""
    from tracker.core.gpus import get_gpu

    try:
        gpu = get_gpu(gpu_id)
    except Exception:  # an unknown GPU id: PCIe 4.0 is the floor of any current server
        return "pcie", 31.0
    link = (gpu.specs.link_gbps_unidirectional if gpu.specs else None) or 31.0
    if gpu.form_factor == "SXM":
        kind = {150: "nvlink2", 300: "nvlink3", 450: "nvlink4", 900: "nvlink5"}.get(
            int(link), "nvlink4")
        return kind, float(link)
    if gpu.form_factor == "OAM":
        return ("xgmi" if gpu.vendor == "amd" else "pcie"), float(link)
    if gpu.form_factor == "NVL":
        return "nvlink-bridge", float(link)
    # PCIe cards: an NVLink bridge is not assumed in a rented instance.
    return "pcie", 63.0 if link >= 63 else min(float(link), 31.0)


def _register() -> None:
    from tracker.core.gpus import on_gpu_overrides

    on_gpu_overrides(gpu_link.cache_clear)


_register()


def _aws_gbps(value: Any) -> float | None:
    """'3200 Gigabit' -> 3200; '4x 100 Gigabit' -> 400; 'Up to 25 Gigabit' -> None."""
    if not isinstance(value, str) or value.strip().lower().startswith("up to"):
        return None
    match = _AWS_GIGABIT.search(value)
    if not match:
        return None
    if match.group(2):
        return float(match.group(1)) * float(match.group(2))
    return float(match.group(1))


def offer_network(provider: str, instance_type: str, gpu_id: str, gpu_count: float,
                  attributes: Mapping[str, Any] | None = None) -> Network:
    """The network facts stored with an offer (see the module docstring for the order)."""
    fam = family_of(provider, instance_type)
    multi = float(gpu_count) > 1
    link_kind, link_gbps = gpu_link(gpu_id)
    if fam is not None and fam.node_link is not None:
        link_kind, link_gbps = fam.node_link, float(fam.node_link_gbps or link_gbps)
    node_link = link_kind if multi else None
    node_gbps = link_gbps if multi else None
    if fam is None:
        return Network(node_link, node_gbps, None, None,
                       f"no cluster fabric known for {provider} (data/fabric.json)")
    cluster, gbps, note = fam.cluster_network, fam.cluster_gbps, fam.summary
    raw = _aws_gbps((attributes or {}).get("network_performance")) if provider == "aws" else None
    if raw is not None and cluster is not None:
        gbps, note = raw, f"{note}; {raw:g} Gb/s from the AWS price list"
    return Network(node_link, node_gbps, cluster, float(gbps) if gbps else None, note)


# Overrides ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Override:
    cluster_network: str
    cluster_gbps: float
    text: str


def parse_overrides(section: Mapping[str, Any] | None) -> dict[str, Override]:
    """`[fabric.overrides."<provider>"]` or `."<provider>/<instance_type>"` tables with
    cluster_network (one of CLUSTER_KINDS) and cluster_gbps (Gb/s per instance)."""
    out: dict[str, Override] = {}
    for key, value in dict((section or {}).get("overrides") or {}).items():
        if not isinstance(value, Mapping):
            raise InvalidInput(f"[fabric.overrides.{key}] must be a table with cluster_network"
                               " and cluster_gbps")
        kind = str(value.get("cluster_network", "")).lower()
        if kind not in CLUSTER_KINDS:
            raise InvalidInput(f"[fabric.overrides.{key}] cluster_network must be one of "
                               f"{', '.join(CLUSTER_KINDS)}, got {value.get('cluster_network')!r}")
        try:
            gbps = float(value["cluster_gbps"])
        except (KeyError, TypeError, ValueError):
            gbps = 0.0
        if not gbps > 0:
            raise InvalidInput(f"[fabric.overrides.{key}] cluster_gbps must be a positive number"
                               " (Gb/s per instance)")
        out[str(key)] = Override(kind, gbps, f"config override {key}: {kind} {gbps:g} Gb/s")
    return out


def effective_cluster(provider: str, instance_type: str, stored: Network,
                      overrides: Mapping[str, Override] | None = None,
                      allow_unclustered: bool = False) -> tuple[str | None, float | None,
                                                                str | None]:
    """(cluster kind, Gb/s per instance, override text or None) a plan may use for an offer.

    A config override for `provider/instance_type` wins over one for `provider`, which wins
    over the stored facts; `allow_unclustered` joins unclustered hosts over plain TCP at
    UNCLUSTERED_GBPS, and says so.
    """
    for key in (f"{provider}/{instance_type}", provider):
        found = (overrides or {}).get(key)
        if found is not None:
            return found.cluster_network, found.cluster_gbps, found.text
    if stored.clustered:
        return stored.cluster_network, stored.cluster_gbps, None
    if allow_unclustered:
        return "tcp", UNCLUSTERED_GBPS, (f"--allow-unclustered: {provider} {instance_type} "
                                         f"hosts joined over {UNCLUSTERED_GBPS:g} Gb/s TCP "
                                         "(assumption)")
    return None, None, None
