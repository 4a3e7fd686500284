"""`peers.tsig`: the key in the config, and a site's answers to signed and unsigned exchange messages."""

from __future__ import annotations

import ipaddress
import random
import struct
import time
from pathlib import Path

import dns.flags
import dns.message
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.TSIG
import dns.tsig
import dns.tsigkeyring
import pytest
from exchange_support import config, env

from gslbd.config import check_config, load_config
from gslbd.exchange.transport import checked, sign
from gslbd.exchange.wireformat import A, BadReply, notify_message, question, with_id
from gslbd.model.tsig import TsigKey
from gslbd.server.build import compile_answers
from gslbd.state.snapshot import Snapshot
from gslbd.wire import Responder

SECRET = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
OTHER = "b3RoZXJvdGhlcm90aGVyb3RoZXJvdGhlcm90aGVyMTI="
PEER_IP = int(ipaddress.IPv4Address("127.0.0.3"))
TSIG = f"  tsig: {{name: gslb-exchange, secret: {SECRET}}}\n"
PEERS = (
    "  interval: 5s\n  stale_after: 30s\n  timeout: 1s\n  sites:\n"
    '    - {name: us, nameservers: ["127.0.0.3:5300"]}\n'
    '    - {name: ap, nameservers: ["127.0.0.4:5300"]}\n'
)
KEY = TsigKey("gslb-exchange.", SECRET)
RING = dns.tsigkeyring.from_text({"gslb-exchange.": SECRET})
LOCALTARGETS = "localtargets-app.gslb.test."


def responder(peers: str = PEERS + TSIG) -> tuple[Responder, list[str]]:
    """A responder of site eu; NOTIFYs its hook accepted are listed."""
    cfg = config(peers=peers)
    view, table = compile_answers(cfg, Snapshot(), env(cfg))
    r = Responder(table, view, random.Random(1))
    accepted: list[str] = []
    r.on_notify = lambda zone, ip, v6: accepted.append(zone) or True
    return r, accepted


def signed(
    name: str, rdtype: str, secret: str = SECRET, keyname: str = "gslb-exchange."
) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    query.use_tsig(dns.tsigkeyring.from_text({keyname: secret}), keyname=keyname)
    return query


def test_the_key_is_read_from_the_config_or_a_bind_key_file_beside_it(tmp_path: Path) -> None:
    inline = config(peers=PEERS + TSIG).peers
    assert inline is not None and inline.tsig == KEY
    (tmp_path / "exchange.key").write_text(
        f'key "gslb-exchange" {{\n\talgorithm hmac-sha512;\n\tsecret "{SECRET}";\n}};\n'
    )
    text = (
        "site: {name: eu}\nzones:\n  - origin: gslb.test.\n"
        "    nameservers: [{name: ns1, address: 127.0.0.2}]\n"
        "peers:\n  sites: [{name: us, nameservers: ['127.0.0.3']}]\n"
        "  tsig: {name: gslb-exchange, algorithm: hmac-sha512, secret_file: exchange.key}\n"
    )
    (tmp_path / "gslbd.yaml").write_text(text)
    peers = load_config(str(tmp_path / "gslbd.yaml")).peers
    assert peers is not None and peers.tsig == TsigKey("gslb-exchange.", SECRET, "hmac-sha512")
    assert SECRET not in repr(peers.tsig)


def test_a_signed_poll_gets_a_signed_answer_that_verifies() -> None:
    r, _ = responder()
    query = signed(LOCALTARGETS, "A")
    wire = r.handle(query.to_wire(), PEER_IP, False)
    assert wire is not None
    reply = dns.message.from_wire(wire, keyring=RING, request_mac=query.mac)
    assert reply.had_tsig and reply.rcode() == dns.rcode.NOERROR
    assert [rd.to_text() for rrset in reply.answer for rd in rrset] == ["192.0.2.1"]


def test_unsigned_queries_are_still_answered_unsigned() -> None:
    r, _ = responder()
    wire = r.handle(dns.message.make_query(LOCALTARGETS, "A").to_wire(), PEER_IP, False)
    reply = dns.message.from_wire(wire or b"")
    assert not reply.had_tsig and reply.rcode() == dns.rcode.NOERROR


@pytest.mark.parametrize(
    ("secret", "keyname", "error"),
    [(OTHER, "gslb-exchange.", dns.rcode.BADSIG), (SECRET, "someone-else.", dns.rcode.BADKEY)],
    ids=["wrong secret", "unknown key name"],
)
def test_a_query_that_does_not_verify_gets_notauth_with_an_unsigned_tsig_error(
    secret: str, keyname: str, error: int
) -> None:
    r, _ = responder()
    wire = r.handle(signed(LOCALTARGETS, "A", secret, keyname).to_wire(), PEER_IP, False)
    reply = dns.message.from_wire(wire or b"", keyring=False)
    assert reply.rcode() == dns.rcode.NOTAUTH
    assert not reply.answer
    assert [q.name.to_text() for q in reply.question] == [LOCALTARGETS]
    assert reply.tsig is not None and reply.tsig.name.to_text() == keyname  # RFC 8945 5.2: the error
    assert (reply.tsig[0].error, reply.tsig[0].mac) == (error, b"")  # unsigned


def test_with_a_key_an_unsigned_notify_is_refused_and_a_signed_one_accepted_with_a_signed_reply() -> None:
    r, accepted = responder()
    reply = dns.message.from_wire(r.handle(notify_message("gslb.test.", 5), PEER_IP, False) or b"")
    assert reply.rcode() == dns.rcode.REFUSED and accepted == [""]
    message, mac = sign(notify_message("gslb.test.", 6), KEY)
    wire = r.handle(message, PEER_IP, False) or b""
    reply = dns.message.from_wire(wire, keyring=RING, request_mac=mac)
    assert (reply.opcode(), reply.rcode()) == (dns.opcode.NOTIFY, dns.rcode.NOERROR)
    assert reply.had_tsig and reply.flags & dns.flags.AA
    assert accepted == ["", "gslb.test."]
    # One signed with another key gets NOTAUTH, and the hook still sees it (to count it as refused).
    message, _ = sign(notify_message("gslb.test.", 7), TsigKey("gslb-exchange.", OTHER))
    reply = dns.message.from_wire(r.handle(message, PEER_IP, False) or b"", keyring=False)
    assert reply.rcode() == dns.rcode.NOTAUTH and accepted == ["", "gslb.test.", ""]


def test_without_a_key_an_unsigned_notify_is_accepted_as_before() -> None:
    r, accepted = responder(PEERS)
    reply = dns.message.from_wire(r.handle(notify_message("gslb.test.", 5), PEER_IP, False) or b"")
    assert reply.rcode() == dns.rcode.NOERROR and accepted == ["gslb.test."]


def test_the_poller_rejects_an_unsigned_or_wrongly_signed_reply_and_takes_a_good_one() -> None:
    q = question(LOCALTARGETS, A)
    message, mac = sign(with_id(q, 77), KEY)
    good, _ = responder()
    unkeyed, _ = responder(PEERS)
    wrong, _ = responder(PEERS + TSIG.replace(SECRET, OTHER))
    assert checked(good.handle(message, PEER_IP, False) or b"", q, 77, KEY, mac).data == ("192.0.2.1",)
    with pytest.raises(BadReply, match=r"^TSIG: the peer does not know our key \(BADKEY\)$"):
        checked(unkeyed.handle(message, PEER_IP, False) or b"", q, 77, KEY, mac)
    with pytest.raises(BadReply, match=r"^TSIG: the peer says our signature is bad \(BADSIG\)$"):
        checked(wrong.handle(message, PEER_IP, False) or b"", q, 77, KEY, mac)  # NOTAUTH + TSIG error
    # A reply is bound to the MAC of the query it answers: checked against another query's, it fails.
    reply = good.handle(message, PEER_IP, False) or b""
    with pytest.raises(BadReply, match=r"^TSIG: the reply's TSIG signature does not verify$"):
        checked(reply, q, 77, KEY, bytes(32))


def load_with_key_file(tmp_path: Path, file_text: str, tsig: str) -> tuple[TsigKey | None, list[str]]:
    (tmp_path / "exchange.key").write_text(file_text)
    text = (
        "site: {name: eu}\nzones:\n  - origin: gslb.test.\n"
        "    nameservers: [{name: ns1, address: 127.0.0.2}]\n"
        f"peers:\n  sites: [{{name: us, nameservers: ['127.0.0.3']}}]\n  tsig: {tsig}\n"
    )
    (tmp_path / "gslbd.yaml").write_text(text)
    config, problems = check_config(str(tmp_path / "gslbd.yaml"))
    errors = [str(p).removeprefix(str(tmp_path) + "/") for p in problems if p.severity == "error"]
    return (config.peers.tsig if config is not None and config.peers is not None else None), errors


def test_a_key_file_gives_name_and_algorithm_and_the_config_may_not_contradict_it(tmp_path: Path) -> None:
    bind = f'key "gslb-exchange" {{\n\talgorithm hmac-sha384;\n\tsecret "{SECRET}";\n}};\n'
    assert load_with_key_file(tmp_path, bind, "{secret_file: exchange.key}") == (
        TsigKey("gslb-exchange.", SECRET, "hmac-sha384"),
        [],
    )
    # A NAME:SECRET line states no algorithm: the config's applies.
    assert load_with_key_file(
        tmp_path, f"k:{SECRET}\n", "{algorithm: hmac-sha512, secret_file: exchange.key}"
    )[0] == TsigKey("k.", SECRET, "hmac-sha512")
    key_file = str(tmp_path / "exchange.key")
    assert load_with_key_file(tmp_path, bind, "{algorithm: hmac-sha256, secret_file: exchange.key}")[1] == [
        f"gslbd.yaml:7: peers.tsig.algorithm: hmac-sha256 but the key file {key_file!r} says hmac-sha384"
    ]
    assert load_with_key_file(tmp_path, bind, "{name: other, secret_file: exchange.key}")[1] == [
        f"gslbd.yaml:7: peers.tsig.name: 'other.' but the key file {key_file!r} holds key 'gslb-exchange.'"
    ]


def query_signed_at(time_signed: int, qid: int = 4321) -> tuple[bytes, bytes]:
    """A query signed with KEY as if at `time_signed` (seconds since the epoch), and its MAC."""
    wire = dns.message.make_query(LOCALTARGETS, "A", use_edns=0, id=qid).to_wire()
    key = dns.tsig.Key("gslb-exchange.", SECRET)
    template = dns.rdtypes.ANY.TSIG.TSIG(
        dns.rdataclass.ANY, dns.rdatatype.TSIG, key.algorithm, 0, 300, b"", qid, 0, b""
    )
    rdata, _ = dns.tsig.sign(wire, key, template, time_signed)
    rdata_wire = rdata.to_wire()
    record = key.name.to_wire() + struct.pack("!HHIH", 250, 255, 0, len(rdata_wire)) + rdata_wire
    return wire[:10] + b"\x00\x02" + wire[12:] + record, rdata.mac


def test_a_query_signed_too_long_ago_gets_badtime_signed_with_our_time() -> None:
    r, _ = responder()
    asked_at = int(time.time()) - 3600
    wire, mac = query_signed_at(asked_at)
    before = int(time.time())
    raw = r.handle(wire, PEER_IP, False) or b""
    reply = dns.message.from_wire(raw, keyring=False)
    assert reply.rcode() == dns.rcode.NOTAUTH and reply.edns == 0  # OPT kept
    tsig = reply.tsig[0]
    assert tsig.error == dns.rcode.BADTIME and tsig.time_signed == asked_at
    ours = int.from_bytes(tsig.other, "big")
    assert before <= ours <= int(time.time())
    # Signed with the key over the query's MAC (RFC 8945 5.2.3): recompute the MAC and compare.
    unsigned = (
        raw[:10]
        + (int.from_bytes(raw[10:12], "big") - 1).to_bytes(2, "big")
        + raw[12 : raw.rindex(b"\x0dgslb-exchange")]
    )
    expected, _ = dns.tsig.sign(
        unsigned, dns.tsig.Key("gslb-exchange.", SECRET), tsig.replace(mac=b""), asked_at, mac
    )
    assert tsig.mac == expected.mac and tsig.mac
