"""Whether the Kubernetes node a pod runs on is spot (preemptible), from the node's labels.

A pod gets SIGTERM for many reasons: the user stops their server, the idle culler or the
hub stops it, a deployment rolls, or a spot node is taken back. Only the last is a spot
interruption, and only a spot node is ever taken back, so SIGTERM counts as one only when
the node is spot by one of the labels the autoscalers and clouds put on it
(:data:`SPOT_LABELS`), or when a notice said so.

A pod cannot read its node's labels itself (the downward API gives the pod's own labels
and annotations). They reach it either way:

* ``GPUCOST_NODE_LABELS``: ``key=value`` pairs, separated by commas or new lines (a
  spawner sets it per profile: ``kubespawner_override: {environment: ...}``);
* a downward API file of the pod's labels or annotations (``key="value"`` a line), at
  ``GPUCOST_NODE_LABELS_FILE`` (several paths separated by ``:``) or else
  :data:`DEFAULT_FILES`, into which the admin copies the node's capacity label (a
  profile's ``extra_labels`` / ``extra_annotations``, or a policy engine).

Read when the signal comes (a file that appears later is seen). Pure but for the reading.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

ENV_LABELS = "GPUCOST_NODE_LABELS"
ENV_FILES = "GPUCOST_NODE_LABELS_FILE"
#: where a downward API volume is usually mounted (Kubernetes' own examples)
DEFAULT_FILES = ("/etc/podinfo/labels", "/etc/podinfo/annotations")
#: a label that says a node is spot or preemptible -> its values that say so (lower case)
SPOT_LABELS: Mapping[str, frozenset[str]] = {
    "karpenter.sh/capacity-type": frozenset({"spot"}),
    "eks.amazonaws.com/capacityType": frozenset({"spot"}),
    "cloud.google.com/gke-spot": frozenset({"true"}),
    "cloud.google.com/gke-preemptible": frozenset({"true"}),
    "kubernetes.azure.com/scalesetpriority": frozenset({"spot"}),
}
#: the largest labels file read
MAX_FILE_BYTES = 1 << 20


def parse_pairs(text: str) -> dict[str, str]:
    """``key=value`` pairs (commas or new lines between them); a downward API file writes
    each value quoted (``key="value"``, Go's escapes), which is unquoted."""
    pairs: dict[str, str] = {}
    for line in text.replace(",", "\n").splitlines():
        key, sep, value = line.strip().partition("=")
        if not sep or not key.strip():
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            try:
                value = str(json.loads(value))
            except ValueError:
                value = value[1:-1]
        pairs[key.strip()] = value
    return pairs


def spot_label(labels: Mapping[str, str]) -> str | None:
    """The label that says the node is spot (``"karpenter.sh/capacity-type=spot"``), or
    ``None``."""
    for key, values in SPOT_LABELS.items():
        value = labels.get(key)
        if value is not None and value.strip().lower() in values:
            return f"{key}={value}"
    return None


def node_labels(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The node labels this pod was told of: ``GPUCOST_NODE_LABELS`` and the files."""
    env = os.environ if environ is None else environ
    labels: dict[str, str] = {}
    raw_files = env.get(ENV_FILES)
    files = raw_files.split(":") if raw_files else list(DEFAULT_FILES)
    for name in files:
        path = Path(name.strip())
        if not name.strip():
            continue
        try:
            with path.open("rb") as f:
                text = f.read(MAX_FILE_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        labels.update(parse_pairs(text))
    labels.update(parse_pairs(env.get(ENV_LABELS, "")))
    return labels


def spot_node(environ: Mapping[str, str] | None = None) -> str | None:
    """The label that says this pod's node is spot, or ``None`` (not spot, or not told)."""
    return spot_label(node_labels(environ))
