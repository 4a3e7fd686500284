"""GeoIP clients outside the topology networks: the share the C table answers and the CPU per query,
without and with the GeoIP prefix cache (wire/_geocache.c).

In process, through `Responder.handle` (the entry point every transport and the C UDP loop's fallback
use), no sockets: a geo service over three sites, a MaxMind database written with mmdb_writer holding
`--prefixes` /24 networks spread over the globe, none in a topology network, and ECS queries from random
addresses in them. "before" is main's behaviour (no cache: every such query is answered by Python after C
declines it), "after" the cache (the first query of each /24 goes to Python, C answers the rest).

    python bench/geocache_bench.py [--queries 100000] [--prefixes 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import ipaddress
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "wire"))

from mmdb_writer import MMDBWriter
from netaddr import IPSet
from wire_support import CONFIG, ORIGIN, SERVICES, make_snapshot, query, svc

from gslbd.answer import build_view
from gslbd.model.topology import Locality, NetworkEntry, SiteInfo, Topology
from gslbd.policy.base import PolicyEnv
from gslbd.policy.locate import TopologyLocator
from gslbd.types import PolicyName
from gslbd.wire import Responder, compile_table
from gslbd.wire import ctable as ct

SITES = {
    "eu": SiteInfo("eu", Locality("europe", "eu-1"), (50.1, 8.7)),
    "us": SiteInfo("us", Locality("america", "us-1"), (40.7, -74.0)),
    "ap": SiteInfo("ap", Locality("asia", "ap-1"), (1.3, 103.8)),
}
TOPOLOGY = (NetworkEntry(ipaddress.ip_network("10.0.0.0/8"), "us", Locality()),)


def world(db: str) -> Responder:
    geo = svc("g3", "192.0.2.51", "192.0.2.52", "192.0.2.53", policy=PolicyName.GEO)
    placed = replace(
        geo,
        endpoints=tuple(replace(e, site=s) for e, s in zip(geo.endpoints, ("eu", "us", "ap"), strict=True)),
    )
    config = replace(CONFIG, services=(*SERVICES, placed))
    locator = TopologyLocator(Topology(networks=TOPOLOGY, geoip_database=db), SITES)
    view = build_view(config, make_snapshot(), PolicyEnv(locator, SITES, random.Random(1)))
    table = compile_table(view, max_udp_payload=1232, use_client_subnet=True)
    return Responder(table, view, random.Random(1), native=True)


def write_db(path: Path, prefixes: int, rng: random.Random) -> list[int]:
    writer = MMDBWriter(ip_version=6, database_type="GeoLite2-City", ipv4_compatible=True)
    nets = []
    for i in range(prefixes):
        base = (100 + i // 65536) << 24 | (i % 65536) << 8  # 100.x.y.0/24 and up: outside 10/8
        record = {"location": {"latitude": rng.uniform(-60, 70), "longitude": rng.uniform(-180, 180)}}
        writer.insert_network(IPSet([f"::{ipaddress.IPv4Address(base)}/120"]), record)
        nets.append(base)
    writer.to_db_file(str(path))
    return nets


def run(responder: Responder, wires: list[bytes]) -> float:
    handle = responder.handle
    start = time.process_time()
    for wire in wires:
        handle(wire, 0xC0000201, False)
    return (time.process_time() - start) / len(wires) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--prefixes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "city.mmdb")
        nets = write_db(Path(tmp) / "city.mmdb", args.prefixes, rng)
        clients = [rng.choice(nets) | rng.randrange(256) for _ in range(args.queries)]
        wires = [query(f"g3.{ORIGIN}", edns=0, ecs=f"{ipaddress.IPv4Address(c)}/32") for c in clients]
        learn = ct.CTable.learn
        for label, cache in (("before (no cache)", False), ("after (GeoIP prefix cache)", True)):
            ct.CTable.learn = learn if cache else (lambda self, data: None)  # type: ignore[method-assign]
            costs, shares = [], []
            for _ in range(args.rounds):
                responder = world(db)  # a new locator: an empty cache
                before = ct.geo_counts()
                costs.append(run(responder, wires))
                after = ct.geo_counts()
                asked = after["miss"] - before["miss"]
                shares.append(1 - asked / len(wires))
            print(
                f"{label}: C answers {statistics.median(shares):.1%}, "
                f"{statistics.median(costs):.2f} us CPU per query (median of {args.rounds}, "
                f"{len(wires)} queries from {args.prefixes} /24s)"
            )
        ct.CTable.learn = learn  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
