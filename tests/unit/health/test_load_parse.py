"""The bodies a load URL may answer (health/load.py): a plain number, {"load": x} JSON, or a Prometheus
text exposition with `metric:`; anything else is garbage with a one-line reason, never an exception of
another kind."""

from __future__ import annotations

import pytest

from gslbd.health.load import Garbage, parse_load

PROMETHEUS = b"""\
# HELP app_load Share of capacity in use.
# TYPE app_load gauge
app_load_total 17
app_load{instance="a"} 0.42
app_load{instance="b"} 0.9
"""


@pytest.mark.parametrize(
    ("body", "metric", "figure"),
    [
        (b"0.42\n", None, 0.42),
        (b"  3 ", None, 3.0),
        (b'{"load": 0.25, "other": 1}', None, 0.25),
        (b'{"load": 1}', None, 1.0),
        (PROMETHEUS, "app_load", 0.42),
        (PROMETHEUS, "app_load_total", 17.0),
    ],
)
def test_a_load_figure_is_read_from_each_body_kind(body: bytes, metric: str | None, figure: float) -> None:
    assert parse_load(body, metric) == figure


@pytest.mark.parametrize(
    ("body", "metric", "why"),
    [
        (b"busy", None, "the body 'busy' is neither a number nor JSON"),
        (b'{"load": "high"}', None, 'the JSON body has no number "load"'),
        (b'{"load": true}', None, 'the JSON body has no number "load"'),
        (b"[1, 2]", None, 'the JSON body has no number "load"'),
        (b"nan", None, "the body nan is not a finite number >= 0"),
        (b"-1", None, "the body -1.0 is not a finite number >= 0"),
        (PROMETHEUS, "missing_metric", "no sample of metric missing_metric in the body"),
        (b"app_load NaN\n", "app_load", "metric app_load nan is not a finite number >= 0"),
        (b"app_load x\n", "app_load", "metric app_load has the value 'x'"),
        (b"\xff\xfe", None, "is neither a number nor JSON"),
    ],
)
def test_garbage_is_reported_with_one_line(body: bytes, metric: str | None, why: str) -> None:
    with pytest.raises(Garbage) as caught:
        parse_load(body, metric)
    assert why in str(caught.value)
