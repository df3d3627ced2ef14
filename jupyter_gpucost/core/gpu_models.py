"""Which catalog model a GPU is, from the name NVML reports (and, where the name is
ambiguous, its memory size): the one owner of that rule."""

from __future__ import annotations

import re
from collections.abc import Sequence

GIB = 1024**3


# NVML device name -> catalog model. Order matters: the first match wins.
_MODEL_RULES: Sequence[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bGH200\b"), "GH200"),
    (re.compile(r"\bH200\b.*\bNVL\b"), "H200-NVL"),
    (re.compile(r"\bH200\b"), "H200"),
    (re.compile(r"\bH100\b.*\bNVL\b"), "H100-NVL"),
    (re.compile(r"\bH100\b"), "H100-80GB"),
    (re.compile(r"\bA100\b.*\b80\s?GB\b"), "A100-80GB"),
    (re.compile(r"\bA100\b.*\b40\s?GB\b"), "A100-40GB"),
    (re.compile(r"\bA100\b"), "A100"),  # resolved by memory size below
    (re.compile(r"\bA10G\b"), "A10G"),
    (re.compile(r"\bA10\b"), "A10"),
    (re.compile(r"\bL40S\b"), "L40S"),
    (re.compile(r"\bL40\b"), "L40"),
    (re.compile(r"\bL4\b"), "L4"),
    (re.compile(r"\bV100\b"), "V100"),
    (re.compile(r"\bT4\b"), "T4"),
    (re.compile(r"\bP100\b"), "P100"),
    (re.compile(r"\bP4\b"), "P4"),
    (re.compile(r"\bB200\b"), "B200"),
    (re.compile(r"\bRTX\s?4090\b"), "RTX-4090"),
    (re.compile(r"\bRTX\s?3090\b"), "RTX-3090"),
]


def model_for(nvml_name: str, memory_total_bytes: int | None = None) -> str | None:
    """The catalog model for an NVML device name, or ``None`` when it is not known.

    >>> model_for("NVIDIA A100-SXM4-80GB")
    'A100-80GB'
    >>> model_for("Tesla T4")
    'T4'
    >>> model_for("NVIDIA H100 80GB HBM3")
    'H100-80GB'
    """
    for pattern, model in _MODEL_RULES:
        if pattern.search(nvml_name):
            if model == "A100":
                if memory_total_bytes is None:
                    return None
                return "A100-80GB" if memory_total_bytes > 60 * GIB else "A100-40GB"
            return model
    return None
