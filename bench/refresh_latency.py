"""Refresh wall time over a slow network vs the critical path.

A loopback server adds 50 ms to every request. Four real sources each need 20 sequential
requests: gcp (20 pages by nextPageToken), azure (20 pages by NextPageLink), skypilot (20
clouds) and aws (18 region price lists, spot.js and the Spot Advisor file). Sources run
concurrently, so the floor is the critical path, 20 x 50 ms = 1.0 s. The figure is the
wall time of `refresh_sources` (the function behind `gpu-tracker refresh`) divided by that
floor. Goal: at most 1.5x.

    python bench/refresh_latency.py [--delay 0.05] [--pages 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.loopback import LoopbackServer, Reply, Request  # noqa: E402
from tracker.collect.refresh import refresh_sources  # noqa: E402
from tracker.config.schema import load_config  # noqa: E402
from tracker.store.db import open_database  # noqa: E402

FIX = ROOT / "tests" / "fixtures"
AWS_REGIONS = ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1",
               "eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1",
               "eu-south-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
               "ap-southeast-1", "ap-southeast-2", "ap-south-1", "sa-east-1"]
CLOUDS = ["aws", "gcp", "lambda", "nebius", "spheron"]


def build_server(server: LoopbackServer, delay: float, pages: int) -> None:
    gcp_first = json.loads((FIX / "gcp" / "skus_page1.json").read_text())

    def gcp(request: Request) -> Reply:
        token = (request.query.get("pageToken") or ["p0"])[0]
        n = int(token[1:])
        body = dict(gcp_first) if n == 0 else {"skus": []}
        body["nextPageToken"] = f"p{n + 1}" if n + 1 < pages else ""
        return Reply(json.dumps(body).encode(), delay=delay)

    azure_first = json.loads((FIX / "azure" / "nc_page1.json").read_text())

    def azure(request: Request) -> Reply:
        skip = int((request.query.get("$skip") or ["0"])[0])
        n = skip // 1000
        body = dict(azure_first) if n == 0 else {"Items": [], "Count": 0}
        body["NextPageLink"] = (f"{server.url}/azure?$skip={(n + 1) * 1000}"
                                if n + 1 < pages else None)
        return Reply(json.dumps(body).encode(), delay=delay)

    def skypilot(request: Request) -> Reply:
        cloud = request.path.split("/")[-2]
        source = CLOUDS[int(cloud.removeprefix("cloud")) % len(CLOUDS)]
        return Reply.file(FIX / "skypilot" / "v8" / source / "vms.csv", delay=delay)

    server.route("/gcp", gcp)
    server.route("/azure", azure)
    for i in range(pages):
        server.route(f"/sky/v8/cloud{i}/vms.csv", skypilot)
    aws_csv = (FIX / "aws" / "us-east-1" / "index.csv").read_bytes()
    for region in AWS_REGIONS:
        server.route(f"/aws/{region}/index.csv", Reply(aws_csv, content_type="text/csv",
                                                       delay=delay))
    server.route("/aws-spot.js", Reply.file(FIX / "aws" / "spot.js", delay=delay))
    server.route("/aws-advisor.json", Reply.file(FIX / "aws" / "spot-advisor-data.json",
                                                 delay=delay))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    assert args.pages == len(AWS_REGIONS) + 2, "aws makes 18 region requests + spot + advisor"
    walls = []
    with LoopbackServer() as server, tempfile.TemporaryDirectory() as tmp:
        build_server(server, args.delay, args.pages)
        env = {
            "GPU_TRACKER_GCP_API_KEY": "bench",
            "GPU_TRACKER_SOURCE_GCP_URL": f"{server.url}/gcp",
            "GPU_TRACKER_SOURCE_AZURE_URL": f"{server.url}/azure",
            "GPU_TRACKER_SOURCE_AZURE_FAMILIES": "NC",
            "GPU_TRACKER_SOURCE_SKYPILOT_URL": f"{server.url}/sky",
            "GPU_TRACKER_SOURCE_SKYPILOT_CLOUDS": ",".join(
                f"cloud{i}" for i in range(args.pages)),
            "GPU_TRACKER_SOURCE_AWS_URL": f"{server.url}/aws",
            "GPU_TRACKER_SOURCE_AWS_SPOT_URL": f"{server.url}/aws-spot.js",
            "GPU_TRACKER_SOURCE_AWS_ADVISOR_URL": f"{server.url}/aws-advisor.json",
            "GPU_TRACKER_SOURCE_AWS_REGIONS": ",".join(AWS_REGIONS),
        }
        config = load_config(environ=env)
        for run in range(args.repeat):
            db = open_database(f"sqlite:///{tmp}/bench{run}.db")
            before = len(server.requests)
            clock = time.perf_counter()
            summaries = refresh_sources(db, config, ["gcp", "azure", "skypilot", "aws"],
                                        environ=env)
            walls.append(time.perf_counter() - clock)
            failed = [f"{s.source}: {s.error}" for s in summaries if s.status != "ok"]
            if failed:
                raise SystemExit("refresh failed: " + "; ".join(failed))
            requests = len(server.requests) - before
            if "--verbose" in sys.argv:
                print([(s.source, round(s.duration_s, 2), s.offers_seen) for s in summaries])
            db.close()
    floor = args.pages * args.delay
    wall = statistics.median(walls)
    print(f"4 sources x {args.pages} sequential requests, {args.delay * 1000:.0f} ms each "
          f"({requests} requests per refresh)")
    print(f"critical path: {floor:.3f} s; refresh wall time (median of {args.repeat}): "
          f"{wall:.3f} s")
    print(f"ratio wall / critical path: {wall / floor:.2f}  (goal <= 1.5)")


if __name__ == "__main__":
    main()
