"""Benchmark: stream a 1 GB AWS bulk price list CSV through the aws source's parser.

    /work/venv/bin/python bench/aws_stream.py [--size-mb 1024] [--gpu-share 0.02] [--keep]

1. Writes a file in the AWS bulk CSV format to a temp dir: the real 5-line preamble and the real
   91-column header (AmazonEC2 price list, 2025), every non-empty field quoted, empty fields
   bare; On-Demand and Reserved terms, several operating systems, tenancies and capacity
   states; about 2 % of the rows belong to GPU instance families.
2. Serves it from a loopback HTTP server (a thread of this process) and runs the real
   `AwsSource.fetch` in a child process (HttpClient.stream_lines -> BulkCsvParser), so the
   child's peak RSS (VmHWM from /proc/self/status) is the parse's own, interpreter included.
   The same parser is also timed reading the file directly (no HTTP).
3. Runs `pandas.read_csv` of the same file (all columns, as strings) in another child process
   as the baseline, and prints both: peak RSS, wall time, MB/s (MB = 10^6 bytes), and ratios.

Goal (README, Development: benchmarks): peak RSS under 200 MB and at least 50 MB/s for the
project's parser.
The temp dir is deleted afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REGION = "us-east-1"

HEADER = [
    "SKU", "OfferTermCode", "RateCode", "TermType", "PriceDescription", "EffectiveDate",
    "StartingRange", "EndingRange", "Unit", "PricePerUnit", "Currency", "RelatedTo",
    "LeaseContractLength", "PurchaseOption", "OfferingClass", "Product Family", "serviceCode",
    "Location", "Location Type", "Instance Type", "Current Generation", "Instance Family", "vCPU",
    "Physical Processor", "Clock Speed", "Memory", "Storage", "Network Performance",
    "Processor Architecture", "Storage Media", "Volume Type", "Max Volume Size",
    "Max IOPS/volume", "Max IOPS Burst Performance", "Max throughput/volume", "Provisioned",
    "Tenancy", "EBS Optimized", "Operating System", "License Model", "Group",
    "Group Description", "Transfer Type", "From Location", "From Location Type", "To Location",
    "To Location Type", "usageType", "operation", "AvailabilityZone", "CapacityStatus",
    "ClassicNetworkingSupport", "Dedicated EBS Throughput", "ECU", "Elastic Graphics Type",
    "Enhanced Networking Supported", "From Region Code", "GPU", "GPU Memory", "Instance",
    "Instance Capacity - 10xlarge", "Instance Capacity - 12xlarge",
    "Instance Capacity - 16xlarge", "Instance Capacity - 18xlarge",
    "Instance Capacity - 24xlarge", "Instance Capacity - 2xlarge",
    "Instance Capacity - 32xlarge", "Instance Capacity - 4xlarge",
    "Instance Capacity - 8xlarge", "Instance Capacity - 9xlarge", "Instance Capacity - large",
    "Instance Capacity - medium", "Instance Capacity - metal", "Instance Capacity - xlarge",
    "instanceSKU", "Intel AVX2 Available", "Intel AVX Available", "Intel Turbo Available",
    "MarketOption", "Normalization Size Factor", "Physical Cores", "Pre Installed S/W",
    "Processor Features", "Product Type", "Region Code", "Resource Type", "serviceName",
    "SnapshotArchiveFeeType", "To Region Code", "Volume API Name", "VPCNetworkingSupport",
]
PREAMBLE = [
    '"FormatVersion","v1.0"',
    '"Disclaimer","This pricing list is for informational purposes only. All prices are subject'
    ' to the additional terms included in the pricing pages on http://aws.amazon.com. All Free'
    ' Tier prices are also subject to the terms included at https://aws.amazon.com/free/"',
    '"Publication Date","2026-08-28T19:14:07Z"',
    '"Version","20260828191407"',
    '"OfferCode","AmazonEC2"',
]
COL = {name: i for i, name in enumerate(HEADER)}

SIZES = {"large": (2, 8), "xlarge": (4, 16), "2xlarge": (8, 32), "4xlarge": (16, 64),
         "8xlarge": (32, 128), "12xlarge": (48, 192), "16xlarge": (64, 256),
         "24xlarge": (96, 384), "48xlarge": (192, 768)}
CPU_FAMILIES = ["m5", "m5a", "m5d", "m5n", "m6i", "m6a", "m6g", "m7i", "m7a", "m7g", "c5",
                "c5a", "c5n", "c6i", "c6a", "c6g", "c7i", "c7g", "r5", "r5a", "r5b", "r6i",
                "r6a", "r6g", "r7i", "r7g", "i3", "i4i", "x2idn", "z1d", "t3", "t3a", "t4g"]
GPU_TYPES = {  # instance type -> (vCPU, GiB, GPUs)
    "p3.2xlarge": (8, 61, 1), "p3.8xlarge": (32, 244, 4), "p3.16xlarge": (64, 488, 8),
    "p4d.24xlarge": (96, 1152, 8), "p5.48xlarge": (192, 2048, 8),
    "g4dn.xlarge": (4, 16, 1), "g4dn.12xlarge": (48, 192, 4), "g5.xlarge": (4, 16, 1),
    "g5.12xlarge": (48, 192, 4), "g5.48xlarge": (192, 768, 8), "g6.xlarge": (4, 16, 1),
    "g6.48xlarge": (192, 768, 8), "g6e.xlarge": (4, 32, 1), "g6e.48xlarge": (192, 1536, 8),
}
OS_CHOICES = [("Linux", "RunInstances", 5), ("Windows", "RunInstances:0002", 4),
              ("RHEL", "RunInstances:0010", 2), ("SUSE", "RunInstances:000g", 2),
              ("Red Hat Enterprise Linux with HA", "RunInstances:1010", 1),
              ("Ubuntu Pro", "RunInstances:0g00", 1)]
TENANCY = [("Shared", "BoxUsage", 5), ("Dedicated", "DedicatedUsage", 3),
           ("Host", "HostBoxUsage", 1)]
CAPACITY = [("Used", 6), ("UnusedCapacityReservation", 2), ("AllocatedCapacityReservation", 1)]
PRESW = [("NA", 6), ("SQL Web", 1), ("SQL Std", 1), ("SQL Ent", 1)]
RESERVED_TERMS = [(lease, option, klass) for lease in ("1yr", "3yr")
                  for klass in ("standard", "convertible")
                  for option in ("No Upfront", "Partial Upfront", "All Upfront")]


def _quote(values: list[str]) -> str:
    return ",".join(f'"{v}"' if v else "" for v in values)


def _weighted(rng: random.Random, options):
    return rng.choices(options, weights=[o[-1] for o in options])[0]


def _price(key: str, scale: float) -> str:
    # Deterministic per offer, so a repeated offer repeats its price (as a real file would).
    return f"{scale * (0.5 + (zlib.crc32(key.encode()) % 1000) / 1000):.10f}"


def _row(rng: random.Random, instance_type: str, vcpu: int, gib: float, gpus: int) -> list[str]:
    os_name, operation, _ = _weighted(rng, OS_CHOICES)
    tenancy, usage, _ = _weighted(rng, TENANCY)
    capacity, _ = _weighted(rng, CAPACITY)
    presw = _weighted(rng, PRESW)[0] if os_name in ("Windows", "Linux") else "NA"
    sku = "".join(rng.choices("ABCDEFGHJKMNPQRSTUVWXYZ23456789", k=16))
    v = [""] * len(HEADER)
    scale = (vcpu * 0.048 + gpus * 3.9) * (1.6 if os_name != "Linux" else 1.0)
    if rng.random() < 0.25:
        term, otc, lease, option, klass = "OnDemand", "JRTCKXETXF", "", "", ""
        desc = f"$0.00 per On Demand {os_name} {instance_type} Instance Hour"
    else:
        lease, option, klass = rng.choice(RESERVED_TERMS)
        term, otc = "Reserved", f"{zlib.crc32((lease + option + klass).encode()) % 10**10:010d}"
        desc = f"{os_name} (Amazon VPC), {instance_type} reserved instance applied"
    upfront = term == "Reserved" and option != "No Upfront" and rng.random() < 0.5
    key = "|".join((instance_type, os_name, tenancy, capacity, presw, term, lease, option, klass,
                    str(upfront)))
    v[COL["SKU"]] = sku
    v[COL["OfferTermCode"]] = otc
    v[COL["RateCode"]] = f"{sku}.{otc}.{'2TG2D8R56U' if upfront else '6YS6EN2CT7'}"
    v[COL["TermType"]] = term
    v[COL["PriceDescription"]] = "Upfront Fee" if upfront else desc
    v[COL["EffectiveDate"]] = "2026-08-01"
    if not upfront:
        v[COL["StartingRange"]], v[COL["EndingRange"]] = "0", "Inf"
    v[COL["Unit"]] = "Quantity" if upfront else "Hrs"
    v[COL["PricePerUnit"]] = _price(key, scale * (8760 if upfront else 1))
    v[COL["Currency"]] = "USD"
    v[COL["LeaseContractLength"]] = lease
    v[COL["PurchaseOption"]] = option
    v[COL["OfferingClass"]] = klass
    v[COL["Product Family"]] = "Compute Instance"
    v[COL["serviceCode"]] = "AmazonEC2"
    v[COL["Location"]] = "US East (N. Virginia)"
    v[COL["Location Type"]] = "AWS Region"
    v[COL["Instance Type"]] = instance_type
    v[COL["Current Generation"]] = "Yes"
    v[COL["Instance Family"]] = "GPU instance" if gpus else "General purpose"
    v[COL["vCPU"]] = str(vcpu)
    v[COL["Physical Processor"]] = (
        "AMD EPYC 7R13 Processor" if gpus else "Intel Xeon 8375C (Ice Lake)")
    v[COL["Clock Speed"]] = "3.5 GHz"
    v[COL["Memory"]] = f"{gib:g} GiB"
    v[COL["Storage"]] = "EBS only"
    v[COL["Network Performance"]] = "Up to 12500 Megabit"
    v[COL["Processor Architecture"]] = "64-bit"
    v[COL["Tenancy"]] = tenancy
    v[COL["Operating System"]] = os_name
    v[COL["License Model"]] = "No License required"
    v[COL["usageType"]] = f"{usage}:{instance_type}"
    v[COL["operation"]] = operation
    v[COL["AvailabilityZone"]] = "NA"
    v[COL["CapacityStatus"]] = capacity
    v[COL["ClassicNetworkingSupport"]] = "false"
    v[COL["Dedicated EBS Throughput"]] = "Up to 10000 Mbps"
    v[COL["ECU"]] = "NA"
    v[COL["Enhanced Networking Supported"]] = "Yes"
    v[COL["GPU"]] = str(gpus) if gpus else ""
    v[COL["GPU Memory"]] = "NA"
    v[COL["Intel AVX2 Available"]] = "Yes"
    v[COL["Intel AVX Available"]] = "Yes"
    v[COL["Intel Turbo Available"]] = "Yes"
    v[COL["MarketOption"]] = "OnDemand"
    v[COL["Normalization Size Factor"]] = str(vcpu * 2)
    v[COL["Pre Installed S/W"]] = presw
    v[COL["Processor Features"]] = "Intel AVX; Intel AVX2; Intel AVX512; Intel Turbo"
    v[COL["Region Code"]] = REGION
    v[COL["serviceName"]] = "Amazon Elastic Compute Cloud"
    v[COL["VPCNetworkingSupport"]] = "true"
    return v


def generate(path: Path, size_bytes: int, gpu_share: float, seed: int = 7) -> dict:
    rng = random.Random(seed)
    cpu_types = [(f"{fam}.{size}", vcpu, gib, 0) for fam in CPU_FAMILIES
                 for size, (vcpu, gib) in SIZES.items()]
    gpu_types = [(name, *spec) for name, spec in GPU_TYPES.items()]
    rows = gpu_rows = 0
    written = 0
    with path.open("w", encoding="utf-8", newline="") as out:
        head = "\n".join([*PREAMBLE, _quote(HEADER)]) + "\n"
        out.write(head)
        written += len(head.encode())
        batch: list[str] = []
        while written < size_bytes:
            is_gpu = rng.random() < gpu_share
            spec = rng.choice(gpu_types if is_gpu else cpu_types)
            line = _quote(_row(rng, *spec)) + "\n"
            batch.append(line)
            written += len(line)  # ASCII only
            rows += 1
            gpu_rows += is_gpu
            if len(batch) >= 20000:
                out.write("".join(batch))
                batch.clear()
        out.write("".join(batch))
    return {"rows": rows, "gpu_rows": gpu_rows, "bytes": path.stat().st_size}


def small_feeds(directory: Path) -> None:
    spot = {"vers": 0.01, "config": {"rate": "perhr", "valueColumns": ["linux", "mswin"],
            "currencies": ["USD"], "regions": [{"region": "us-east", "instanceTypes": [
                {"type": "gpuCurrentGen", "sizes": [
                    {"size": name, "valueColumns": [{"name": "linux", "prices": {
                        "USD": f"{gpus * 1.1:.4f}"}}]} for name, (_, _, gpus) in GPU_TYPES.items()
                ]}]}]}}
    (directory / "spot.js").write_text("callback(" + json.dumps(spot) + ");")
    advisor = {"global_rate": "<10%", "instance_types": {},
               "ranges": [{"index": i, "label": label, "dots": i, "max": mx} for i, (label, mx)
                          in enumerate([("<5%", 5), ("5-10%", 11), ("10-15%", 16),
                                        ("15-20%", 22), (">20%", 100)])],
               "spot_advisor": {REGION: {"Linux": {name: {"s": 60, "r": i % 5} for i, name
                                                   in enumerate(GPU_TYPES)}}}}
    (directory / "advisor.json").write_text(json.dumps(advisor))


# -- child processes -------------------------------------------------------------------------

def _peak_rss_mb() -> float:
    """Peak RSS of this process image. VmHWM, not ru_maxrss: Linux carries ru_maxrss over
    fork and execve, so a child would report the parent's size (the generator's) as its own."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child_parse_http(base: str) -> dict:
    from datetime import UTC, datetime

    from scrapers.aws import AwsSource
    from scrapers.base import InterruptionFact, PriceObservation, Rejected
    from scrapers.http import HttpClient

    source = AwsSource.from_config({
        "url": base, "regions": [REGION], "spot_url": f"{base}/spot.js",
        "advisor_url": f"{base}/advisor.json"}, environ={})
    counts = {"observations": 0, "rejected": 0, "facts": 0}
    baseline = _peak_rss_mb()
    start = time.perf_counter()
    with HttpClient() as client:
        for record in source.fetch(client, datetime.now(UTC)):
            if isinstance(record, PriceObservation):
                counts["observations"] += 1
            elif isinstance(record, Rejected):
                counts["rejected"] += 1
            elif isinstance(record, InterruptionFact):
                counts["facts"] += 1
    elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "peak_rss_mb": _peak_rss_mb(), "rss_before_mb": baseline,
            **counts}


def child_parse_file(path: str) -> dict:
    from datetime import UTC, datetime

    from scrapers.aws import AwsSource, BulkCsvParser

    parser = BulkCsvParser(families=tuple(AwsSource.DEFAULTS["gpu_families"]),
                           fetched_at=datetime.now(UTC), region=REGION)
    baseline = _peak_rss_mb()
    start = time.perf_counter()
    with open(path, encoding="utf-8", newline="") as lines:
        records = sum(1 for _ in parser.parse(line.rstrip("\n") for line in lines))
    elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "peak_rss_mb": _peak_rss_mb(), "rss_before_mb": baseline,
            "records": records}


def child_pandas(path: str) -> dict:
    import pandas as pd

    baseline = _peak_rss_mb()
    start = time.perf_counter()
    frame = pd.read_csv(path, skiprows=5, dtype=str, keep_default_na=False)
    gpu = frame[frame["Instance Type"].str.match(r"(p3|p4d|p5|g4dn|g5|g6|g6e)\.")
                & (frame["Operating System"] == "Linux") & (frame["Tenancy"] == "Shared")]
    elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "peak_rss_mb": _peak_rss_mb(), "rss_before_mb": baseline,
            "rows": len(frame), "gpu_linux_shared_rows": len(gpu)}


def run_child(*args: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", *args],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["exit " + str(done.returncode)])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- main ------------------------------------------------------------------------------------------

def serve(directory: Path) -> tuple[ThreadingHTTPServer, str]:
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="file size in MiB")
    parser.add_argument("--gpu-share", type=float, default=0.02)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument("--skip-pandas", action="store_true")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, target = args.child
        result = {"http": child_parse_http, "file": child_parse_file,
                  "pandas": child_pandas}[kind](target)
        print(json.dumps(result))
        return 0

    workdir = Path(tempfile.mkdtemp(prefix="aws_stream_bench_"))
    try:
        (workdir / REGION).mkdir()
        csv_path = workdir / REGION / "index.csv"
        start = time.perf_counter()
        info = generate(csv_path, args.size_mb * 1024 * 1024, args.gpu_share)
        print(f"generated {info['bytes'] / 1e6:.0f} MB, {info['rows']:,} rows "
              f"({info['gpu_rows'] / info['rows']:.1%} GPU) in "
              f"{time.perf_counter() - start:.0f} s: {csv_path}")
        small_feeds(workdir)
        size_mb = info["bytes"] / 1e6
        server, base = serve(workdir)
        try:
            results = {"project parser, loopback HTTP (AwsSource.fetch)": run_child("http", base)}
        finally:
            server.shutdown()
        results["project parser, from file (BulkCsvParser)"] = run_child("file", str(csv_path))
        if not args.skip_pandas:
            results["pandas.read_csv (baseline)"] = run_child("pandas", str(csv_path))
        print(f"\n{'run':52} {'peak RSS':>10} {'wall':>8} {'MB/s':>8}")
        for name, r in results.items():
            if "error" in r:
                print(f"{name:52} failed: {r['error']}")
                continue
            r["mb_per_s"] = size_mb / r["seconds"]
            print(f"{name:52} {r['peak_rss_mb']:>7.0f} MB {r['seconds']:>6.1f} s "
                  f"{r['mb_per_s']:>8.0f}")
        ours = results["project parser, loopback HTTP (AwsSource.fetch)"]
        base_run = results.get("pandas.read_csv (baseline)", {})
        if "error" not in ours:
            print(f"\nproject parser: {ours['observations']} observations, "
                  f"{ours['rejected']} rejected, {ours['facts']} interruption facts; "
                  f"RSS before parsing {ours['rss_before_mb']:.0f} MB")
            ok = ours["peak_rss_mb"] < 200 and ours["mb_per_s"] >= 50
            print(f"goal (peak RSS < 200 MB, >= 50 MB/s): {'met' if ok else 'NOT met'}")
            if base_run and "error" not in base_run:
                rss_ratio = base_run["peak_rss_mb"] / ours["peak_rss_mb"]
                time_ratio = base_run["seconds"] / ours["seconds"]
                print(f"pandas / project: peak RSS x{rss_ratio:.1f}, time x{time_ratio:.1f}")
        print(json.dumps(results, indent=1))
        return 0
    finally:
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
