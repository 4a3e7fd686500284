"""The wire layer: a C table of precompiled answers, and dnspython for everything else.

- `compile_table(view, max_udp_payload=..., use_client_subnet=...)` -> `AnswerTable` (control plane);
  `update_table(table, view, changed, removed)` recompiles only some names of a table;
- `Responder(table, view, rng)`: `handle(data, src_ip, src_v6, tcp=False)` answers one query packet,
  `swap(table, view)` serves a new table; with the C extension it keeps a C copy of the table
  (`ctable.py`, `_cfast.c`) that answers first, and that the C UDP loop reads through `responder.slot`;
- `slow_response(...)`: the complete behaviour with dnspython (what C leaves, and the C table's oracle).
"""

from gslbd.wire.compile import AnswerTable, compile_table, update_table, wire_key
from gslbd.wire.fastpath import Responder
from gslbd.wire.slowpath import slow_response

__all__ = [
    "AnswerTable",
    "Responder",
    "compile_table",
    "slow_response",
    "update_table",
    "wire_key",
]
