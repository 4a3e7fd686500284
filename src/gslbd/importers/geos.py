"""octoDNS geo codes (`EU`, `NA-US`, `NA-US-CA`: continent, ISO country, subdivision) in gslbd terms: a
locality region (the code lowercased) and, for the continent, a centre to give the site as coordinates."""

from __future__ import annotations

from gslbd.importers.values import site_name

# A rough centre of each continent octoDNS names (latitude, longitude).
_CENTRES: dict[str, tuple[float, float]] = {
    "AF": (2.0, 21.0),
    "AN": (-80.0, 0.0),
    "AS": (34.0, 100.0),
    "EU": (50.0, 10.0),
    "NA": (45.0, -100.0),
    "OC": (-25.0, 135.0),
    "SA": (-15.0, -60.0),
}


def region_of(geo: str) -> str:
    return site_name(geo)


def continent_centre(geo: str) -> tuple[float, float] | None:
    return _CENTRES.get(geo.split("-", maxsplit=1)[0].upper())
