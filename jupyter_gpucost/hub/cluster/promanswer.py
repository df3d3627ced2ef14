"""Reading an answer of the Prometheus HTTP API's instant query (``/api/v1/query``), which
may come from anywhere: a proxy's error page, a Prometheus under load, or a hostile one.

Everything is bounded before it is kept: the body's size (the client stops reading past
it), the number of series, of labels per series and the length of each label. A value that
is not a finite number drops its series (counted, never kept as 0). An answer that is not
a vector, or says ``"status": "error"``, is refused whole with a sentence saying why.

Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

#: the largest answer read (bytes); past it the answer is refused
MAX_ANSWER_BYTES = 16 * 1024 * 1024
#: series one answer may hold (a cluster of 2,500 8-GPU nodes)
MAX_SERIES = 20_000
#: labels of one series kept (dcgm-exporter writes about 12)
MAX_LABELS = 64
#: the longest label name or value kept
MAX_LABEL_CHARS = 512
#: the longest part of an error message shown
MAX_MESSAGE_CHARS = 300


class AnswerRefused(ValueError):
    """An answer that cannot be used; the message says why, in a line."""


@dataclass(frozen=True)
class Sample:
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Vector:
    samples: tuple[Sample, ...]
    #: series left out: a value that is not a finite number, labels past the bounds
    refused: int = 0


def _short(text: object) -> str:
    line = " ".join(str(text).split())
    return line[:MAX_MESSAGE_CHARS] + ("…" if len(line) > MAX_MESSAGE_CHARS else "")


def _labels(raw: object) -> dict[str, str] | None:
    if not isinstance(raw, dict) or len(raw) > MAX_LABELS:
        return None
    labels: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(value, str) or len(key) > MAX_LABEL_CHARS:
            return None
        if len(value) > MAX_LABEL_CHARS:
            return None
        labels[key] = value
    return labels


def _value(raw: object) -> float | None:
    # [ <unix time>, "<value>" ]: the value is a string, "NaN" and "+Inf" included
    if not isinstance(raw, list) or len(raw) != 2 or not isinstance(raw[1], str):
        return None
    if len(raw[1]) > 64:
        return None
    try:
        value = float(raw[1])
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_vector(body: bytes, *, max_series: int = MAX_SERIES) -> Vector:
    """The samples of an instant query's answer. :class:`AnswerRefused` when the answer
    is not a successful vector, is too large, or holds more than ``max_series`` series."""
    if len(body) > MAX_ANSWER_BYTES:
        raise AnswerRefused(f"the answer is larger than {MAX_ANSWER_BYTES} bytes")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise AnswerRefused(f"the answer is not JSON: {_short(body[:200])!s}") from None
    if not isinstance(doc, dict):
        raise AnswerRefused("the answer is not a JSON object")
    if doc.get("status") != "success":
        kind, error = doc.get("errorType"), doc.get("error")
        if isinstance(error, str):
            raise AnswerRefused(f"Prometheus says {_short(kind)}: {_short(error)}")
        raise AnswerRefused(f"the answer's status is {_short(doc.get('status'))!r}")
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise AnswerRefused("the answer is not an instant vector")
    result = data.get("result")
    if not isinstance(result, list):
        raise AnswerRefused("the answer's result is not a list")
    if len(result) > max_series:
        raise AnswerRefused(
            f"the answer holds {len(result)} series, more than {max_series}: set "
            "c.GpuCostHub.prometheus_namespace to the user pods' namespace"
        )
    samples: list[Sample] = []
    refused = 0
    for item in result:
        if not isinstance(item, dict):
            refused += 1
            continue
        labels = _labels(item.get("metric"))
        value = _value(item.get("value"))
        if labels is None or value is None:
            refused += 1
            continue
        samples.append(Sample(labels, value))
    return Vector(tuple(samples), refused)
