"""`dns` checks: ask the endpoint (a DNS server) for `query`/`qtype`; healthy when the rcode is
`expect_rcode` and, with `expect_answer`, some answer record's text contains it. A truncated UDP
reply is asked again over TCP. Without `query` the endpoint's own service name is asked."""

from __future__ import annotations

import asyncio
import socket

import dns.asyncquery
import dns.exception
import dns.message
import dns.rcode
import dns.rdatatype

from gslbd.health.probes.base import BaseProbe, ProbeFailed, describe_error, probe_host, quote, seconds
from gslbd.model.check import Check
from gslbd.model.service import Endpoint


async def resolve(host: str, port: int) -> str:
    """An IP address for host (itself when it is one)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    if not infos:
        raise ProbeFailed(f"cannot resolve {host}")
    return str(infos[0][4][0])


def answer_texts(response: dns.message.Message) -> list[str]:
    return [line for rrset in response.answer for line in rrset.to_text().splitlines()]


class DnsProbe(BaseProbe):
    async def attempt(self, endpoint: Endpoint, check: Check) -> tuple[bool, str]:
        port = check.effective_port() or 53
        where = await resolve(probe_host(endpoint), port)
        qname = check.query if check.query is not None else endpoint.service
        request = dns.message.make_query(qname, dns.rdatatype.from_text(check.qtype))
        try:
            response, _ = await dns.asyncquery.udp_with_fallback(
                request, where, timeout=check.timeout, port=port
            )
        except dns.exception.Timeout:
            raise ProbeFailed(f"timeout after {seconds(check.timeout)}") from None
        except (dns.exception.DNSException, OSError) as exc:
            raise ProbeFailed(f"DNS query failed: {describe_error(exc)}") from None
        rcode = dns.rcode.to_text(response.rcode())
        if rcode != check.expect_rcode:
            return False, f"rcode {rcode} (expected {check.expect_rcode})"
        answers = answer_texts(response)
        if check.expect_answer is None:
            return True, f"rcode {rcode}, {len(answers)} answer" + ("" if len(answers) == 1 else "s")
        if any(check.expect_answer in text for text in answers):
            return True, f"rcode {rcode}, answer contains {quote(check.expect_answer)}"
        return False, f"rcode {rcode}, no answer contains {quote(check.expect_answer)}"
