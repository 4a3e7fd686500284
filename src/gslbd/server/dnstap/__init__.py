"""The dnstap query log (`log.dnstap`): AUTH_QUERY / AUTH_RESPONSE messages over Frame Streams.

    with_dnstap(handler, config, stats) -> (handler, sink | None)   wrap the Responder when dnstap is on
    DnstapSink.stop()                                                flush, STOP/FINISH, end the thread

message.py encodes the protobuf by hand, fstrm.py speaks Frame Streams, sink.py is the writer thread and
its bounded queue, tap.py the Handler the listeners call.
"""

from gslbd.server.dnstap.sink import DnstapSink
from gslbd.server.dnstap.tap import DnstapHandler, with_dnstap

__all__ = ["DnstapHandler", "DnstapSink", "with_dnstap"]
