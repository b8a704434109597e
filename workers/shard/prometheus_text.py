"""Reading a Prometheus text exposition for the series of known names, within bounds.

A serving stack's ``/metrics`` answer is mostly histogram buckets nobody here reads
(vLLM's is hundreds of KB); only the lines of the names in ``scenarios/wire/server_metrics.py``
are parsed (a ``startswith`` on each line, then ``prometheus_client``'s parser on the
few kept), so the cost stays small and a malformed line elsewhere cannot fail a scrape.
A kept line that does not parse, carries a non-finite value, too many labels or too
long a label, or comes after ``MAX_METRICS_SERIES`` kept ones, is dropped and counted.
Pure and synchronous: the scraper runs it in a thread, off the event loop.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from scenarios.limits import MAX_METRICS_LABEL_CHARS, MAX_METRICS_LABELS, MAX_METRICS_SERIES

_NAME_END = ("{", " ", "\t")


@dataclass(slots=True)
class Parsed:
    """The kept samples of one answer, and how many kept lines were dropped."""

    samples: list[dict[str, object]] = field(default_factory=list)
    dropped: int = 0


def _name_of(line: str) -> str:
    end = len(line)
    for mark in _NAME_END:
        at = line.find(mark)
        if 0 <= at < end:
            end = at
    return line[:end]


def _within_bounds(labels: dict[str, str]) -> bool:
    return len(labels) <= MAX_METRICS_LABELS and all(
        len(k) <= MAX_METRICS_LABEL_CHARS and len(v) <= MAX_METRICS_LABEL_CHARS
        for k, v in labels.items()
    )


def parse_known(text: str, names: Iterable[str], max_series: int = MAX_METRICS_SERIES) -> Parsed:
    """Samples ``{metric, labels, value}`` of the lines of ``text`` whose sample name is
    one of ``names`` (comments and every other line skipped), at most ``max_series``."""
    wanted = frozenset(names)
    prefixes = tuple(wanted)
    parsed = Parsed()
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith(prefixes) or _name_of(line) not in wanted:
            continue
        if len(parsed.samples) >= max_series:
            parsed.dropped += 1
            continue
        try:
            samples = [s for family in text_string_to_metric_families(line) for s in family.samples]
        except ValueError:
            parsed.dropped += 1
            continue
        for sample in samples:
            value = float(sample.value)
            if not math.isfinite(value) or not _within_bounds(sample.labels):
                parsed.dropped += 1
                continue
            labels = sorted(sample.labels.items())
            parsed.samples.append({"metric": sample.name, "labels": labels, "value": value})
    return parsed
