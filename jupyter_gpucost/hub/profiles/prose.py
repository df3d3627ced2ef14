"""What a profile's words say about its GPU, for ``check-profiles``' hints only.

Admins often name the GPU only in a profile's ``display_name`` or ``description``
("NVIDIA Tesla T4", "1x A100 80GB"). The pod's settings are what is billed, so a profile
whose settings name no GPU is still refused; the check suggests the setting that says
what the words say (``display_name mentions T4: set c.GpuCostHub.profile_gpus['gpu'] =
'T4'``), never billing from prose.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..allocation import PROFILES_SETTING
from .kubespawner import get_profile
from .table import ProfileTable

#: GPU names as people write them → the catalog's model names (several: the words do
#: not tell which)
_NAMES = (
    (r"A100[\s-]*(?:SXM4?[\s-]*|PCIE[\s-]*)?80\s*GB", ("A100-80GB",)),
    (r"A100[\s-]*(?:SXM4?[\s-]*|PCIE[\s-]*)?40\s*GB", ("A100-40GB",)),
    (r"A100", ("A100-40GB", "A100-80GB")),
    (r"H100[\s-]*NVL", ("H100-NVL",)),
    (r"GH200", ("GH200",)),
    (r"H100", ("H100-80GB",)),
    (r"H200", ("H200",)),
    (r"B200", ("B200",)),
    (r"L40S", ("L40S",)),
    (r"A10G", ("A10G",)),
    (r"A10", ("A10",)),
    (r"L4", ("L4",)),
    (r"T4", ("T4",)),
    (r"V100", ("V100",)),
)
_PATTERNS = [(re.compile(rf"(?<![A-Za-z0-9]){p}(?![A-Za-z0-9])", re.I), m) for p, m in _NAMES]
_COUNT = re.compile(r"(?<![A-Za-z0-9.])(\d{1,2})\s*[x×]\s*(?:NVIDIA\s+)?(?:Tesla\s+)?[A-Z]", re.I)


def models_in(text: str) -> tuple[str, ...]:
    """The catalog models ``text`` names (the first name found; several when the words
    leave it open)."""
    for pattern, models in _PATTERNS:
        if pattern.search(text):
            return models
    return ()


def hint(slug: str, fields: Mapping[str, object]) -> str:
    """The hint for one profile whose settings name no GPU; "" when its words name none."""
    for name in ("display_name", "description"):
        text = fields.get(name)
        if not isinstance(text, str):
            continue
        models = models_in(text)
        if not models:
            continue
        count = _COUNT.search(text)
        many = f" x {count.group(1)}" if count and count.group(1) != "1" else ""
        choices = " or ".join(f"'{m}{many}'" for m in models)
        return (
            f"profile {slug!r}: {name} mentions {'/'.join(models)}: set "
            f"{PROFILES_SETTING}[{slug!r}] = {choices} (the pod's settings do not say "
            "which GPU; the check does not guess from words), or add a node selector "
            "naming it"
        )
    return ""


def prose_hints(table: ProfileTable) -> dict[str, str]:
    """A hint per profile that cannot be priced and whose words name a GPU, by slug."""
    found: dict[str, str] = {}
    for line in table.lines:
        # only where the settings leave the model unsaid
        if "names the GPU model" not in line.problem or line.slug in found:
            continue
        try:
            profile = get_profile(line.slug, table.profiles)
        except ValueError:
            continue
        text = hint(line.slug, profile)
        if text:
            found[line.slug] = text
    return found
