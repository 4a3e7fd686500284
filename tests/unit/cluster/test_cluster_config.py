"""`cluster.redis.url` is checked at load, so an unusable URL never reaches the running instance."""

from __future__ import annotations

import pytest

from gslbd.config import load_config_text
from gslbd.errors import ConfigError
from gslbd.types import SyncMode

BASE = """
version: 1
dns: {{listen: ["127.0.0.1:5353"]}}
zones: [{{origin: gslb.example.com., nameservers: [{{name: ns1.gslb.example.com., address: 127.0.0.1}}]}}]
cluster: {{redis: {{url: "{url}", sync_mode: none, key_prefix: "site-a:"}}}}
"""


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "rediss://redis.example.net:6380/2?ssl_ca_certs=/etc/gslbd/ca.pem",
        "unix:///run/redis/redis.sock?db=1",
        "redis+sentinel://10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/0?sentinel_password=x",
    ],
)
def test_every_scheme_loads_with_its_options(url: str) -> None:
    config = load_config_text(BASE.format(url=url))
    assert config.cluster is not None
    assert config.cluster.redis.url == url
    assert config.cluster.redis.sync_mode is SyncMode.NONE
    assert config.cluster.redis.key_prefix == "site-a:"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "redis+sentinel://s1:26379,s2:x/mymaster",
            "<string>:5: cluster.redis.url: 'redis+sentinel://s1:26379,s2:x/mymaster': invalid sentinel "
            "address 's2:x'; expected host[:port]",
        ),
        (
            "redis+sentinel://s1/mymaster?ssl=true",
            "<string>:5: cluster.redis.url: 'redis+sentinel://s1/mymaster?ssl=true': unsupported option "
            "'ssl'; a sentinel URL takes sentinel_password",
        ),
    ],
)
def test_unusable_sentinel_urls_are_config_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config_text(BASE.format(url=url))
    assert str(caught.value) == message
