"""What a pod's settings say of its node: every GPU model or instance-type label value its
``node_selector``, its ``kubespawner_override`` keys and its required node affinity
(``matchExpressions`` with ``operator: In``) name, each with where it was read; and
:class:`Unpriced`, the error of a pod's GPUs that cannot be priced.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .gpu_labels import INSTANCE_LABELS, KARPENTER_GPU_MEMORY, MODEL_LABELS
from .kubespawner import State, Unreadable


class Unpriced(ValueError):
    """A pod's GPUs that cannot be priced; the message says why."""


@dataclass(frozen=True)
class Candidate:
    """One value a key may take, and where it was read."""

    key: str
    value: object
    where: str
    memory: object = None


def candidates(state: State) -> list[Candidate]:
    """Every GPU model or instance-type label value the settings name."""
    found: list[Candidate] = []
    labels = (*MODEL_LABELS, *INSTANCE_LABELS)
    selector = state.get("node_selector")
    if isinstance(selector, Unreadable):
        raise Unpriced(f"node_selector cannot be read statically ({selector.what})")
    if isinstance(selector, Mapping):
        memory = selector.get(KARPENTER_GPU_MEMORY)
        for key in labels:
            if key in selector:
                found.append(Candidate(key, selector[key], f"node_selector {key}", memory))
    for key in labels:
        direct = state.get(key)
        if isinstance(direct, Unreadable):
            raise Unpriced(f"{key} cannot be read statically ({direct.what})")
        if direct is not None:
            found.append(Candidate(key, direct, f"kubespawner_override {key}"))
    affinity = state.get("node_affinity_required")
    if isinstance(affinity, Unreadable):
        raise Unpriced(f"node_affinity_required cannot be read statically ({affinity.what})")
    if isinstance(affinity, Sequence) and not isinstance(affinity, str):
        for term in affinity:
            expressions = term.get("matchExpressions") if isinstance(term, Mapping) else None
            if not isinstance(expressions, Sequence):
                continue
            memory = None
            for e in expressions:
                if isinstance(e, Mapping) and e.get("key") == KARPENTER_GPU_MEMORY:
                    values = e.get("values")
                    if isinstance(values, Sequence) and len(values) == 1:
                        memory = values[0]
            for e in expressions:
                if not isinstance(e, Mapping) or e.get("key") not in labels:
                    continue
                if e.get("operator") != "In":
                    continue
                values = e.get("values")
                if not isinstance(values, Sequence) or isinstance(values, str):
                    continue
                key = str(e["key"])
                for v in values:
                    found.append(Candidate(key, v, f"node_affinity_required {key} In", memory))
    return found
