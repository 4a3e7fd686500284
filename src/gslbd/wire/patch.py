"""Replacing a few names' records without recompiling the whole answer table.

The heartbeat (`heartbeat-<site>.<origin>` TXT, answer/exchange_names.py) changes every few seconds
while nothing else does; recompiling thousands of names for it would cost tens of milliseconds of the
event loop each time. `patch_records` instead makes a new table and view that share every node with
the old ones but the patched names: two dict copies and one small compile. The result is swapped in
whole (`Responder.swap(..., same_counters=True)`: the shared entries keep counting), so a query still
sees either the old or the new answers.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace

from gslbd.answer import NameData, Records, Rr, View
from gslbd.answer.exchange_names import RRset
from gslbd.state.snapshot import Snapshot
from gslbd.wire.compile import AnswerTable, Entry, compile_node, wire_key


def patch_records(
    table: AnswerTable, view: View, snapshot: Snapshot, rrsets: Iterable[RRset]
) -> tuple[AnswerTable, View]:
    """`table` and `view` with each RRset's (name, type) set to its records, and `snapshot` as the
    view's snapshot. Names that did not exist are added (they must not need empty non-terminals)."""
    names = dict(view.names)
    nodes = dict(table.names)
    refused = Entry(None, itertools.count(), (table.refused,), False)
    for name, zone, rtype, rdatas in rrsets:
        old = names.get(name)
        data = NameData(
            name, zone, dict(old.outcomes) if old is not None else {}, old.service if old else None
        )
        data.outcomes[rtype] = Records(tuple(Rr(name, rtype, ttl, rd) for ttl, rd in rdatas))
        names[name] = data
        nodes[wire_key(name)] = compile_node(data, refused)
    return replace(table, names=nodes), View(view.zones, names, view.config, snapshot)
