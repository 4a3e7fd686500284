"""With peers.quorum a vote that changes no answer still changes what this site publishes (and so
NOTIFYs its peers): the generation republishes the services whose verdicts changed."""

from __future__ import annotations

import random

from gslbd.app.generation import GenerationBuilder, NewSnapshot, resolve
from gslbd.app.reconcile import vote_owners
from gslbd.config import load_config_text
from gslbd.state.book import HealthBook
from gslbd.state.status import EndpointStatus

CONFIG = """\
site: {name: eu}
zones:
  - origin: gslb.test.
    nameservers:
      - {name: gslb-ns-eu-gslb.test., address: 127.0.0.2}
      - {name: gslb-ns-us-gslb.test., address: 127.0.0.3}
      - {name: gslb-ns-ap-gslb.test., address: 127.0.0.4}
services:
  - name: app
    check: {type: tcp, port: 80}
    endpoints:
      - {address: 192.0.2.1, site: eu}
      - {address: 198.51.100.1, site: us}
peers:
  quorum: {votes: 2}
  sites:
    - {name: us, nameservers: ["127.0.0.3:53"]}
    - {name: ap, nameservers: ["127.0.0.4:53"]}
"""
APP, EU, US = "app.gslb.test.", "192.0.2.1", "198.51.100.1"


def test_a_vote_that_changes_no_answer_is_published_and_notified() -> None:
    resolved = resolve(load_config_text(CONFIG), random.Random(1))
    book = HealthBook()
    book.configure_quorum(2, "eu", vote_owners(resolved.config, resolved.probed.values()))
    book.set_peer_votes({"us": {(APP, US): True}, "ap": {(APP, US): True}})
    builder = GenerationBuilder()
    first = builder.first(resolved, book.snapshot())
    book.take_touched()
    assert "votes-app.gslb.test." not in first.publication.get("gslb.test.", {})

    book.record((APP, US), EndpointStatus(healthy=False))  # this site alone cannot reach us's endpoint
    after = builder.next(first, NewSnapshot(book.snapshot(), book.take_touched()))
    assert after.publication["gslb.test."]["votes-app.gslb.test."] == (f"{US}=down",)
    assert after.notify_zones == ("gslb.test.",)
    assert after.count(APP) is not None and after.count(APP).up_addresses == (EU,)  # type: ignore[union-attr]
