"""The Kubernetes pod name KubeSpawner gives a user's server, so that the cluster's
metrics (labelled by pod) can be joined to the Hub's servers (named by user and server).

The same expansion as KubeSpawner 7's ``_expand_user_properties`` and ``slugs`` module:
``pod_name_template`` (``"jupyter-{user_server}"`` by default) formatted with the fields
KubeSpawner documents, under its ``slug_scheme`` (``"safe"``, KubeSpawner 7's default, or
``"escape"``, the scheme of KubeSpawner < 7, where the default template was
``"jupyter-{username}--{servername}"``), then trailing ``-`` stripped unless the template
itself ends with one.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from typing import Literal

SlugScheme = Literal["safe", "escape"]

DEFAULT_TEMPLATE = "jupyter-{user_server}"

#: the fields a pod name template may use here; KubeSpawner's others (``userid``,
#: ``pvc_name``, ``namespace``…) are not known from the Hub's API
FIELDS = frozenset(
    {
        "username",
        "servername",
        "user_server",
        "unescaped_username",
        "unescaped_servername",
        "safe_username",
        "safe_servername",
        "safe_user_server",
        "escaped_username",
        "escaped_servername",
        "escaped_user_server",
    }
)

_SLUG_MAX_LENGTH = 48
_HASH_LENGTH = 8
_ALPHA_LOWER = tuple(string.ascii_lowercase)
_ALPHANUM_LOWER = tuple(string.ascii_lowercase + string.digits)
_OBJECT_PATTERN = re.compile(r"^[a-z0-9\-]+$")
_NON_ALPHANUM = re.compile(r"[^a-z0-9]+")
_ESCAPE_SAFE = frozenset(string.ascii_lowercase + string.digits)


def escape_slug(name: str) -> str:
    """KubeSpawner's legacy ``escape`` scheme (escapism with ``-``, then lower case)."""
    out = []
    for c in name:
        if c in _ESCAPE_SAFE:
            out.append(c)
        else:
            out.extend(f"-{byte:X}" for byte in c.encode("utf8"))
    return "".join(out).lower()


def _is_valid_object_name(s: str) -> bool:
    return (
        0 < len(s) <= 63
        and s.startswith(_ALPHA_LOWER)
        and s.endswith(_ALPHANUM_LOWER)
        and bool(_OBJECT_PATTERN.match(s))
    )


def _extract_safe_name(name: str, max_length: int) -> str:
    safe = _NON_ALPHANUM.sub("-", name.lower())
    safe = safe.lstrip("-")[:max_length].rstrip("-")
    if safe and not safe.startswith(_ALPHA_LOWER):
        safe = "x-" + safe[: max_length - 2]
    return safe or "x"


def _strip_and_hash(name: str, max_length: int = 32) -> str:
    digest = hashlib.sha256(name.encode("utf8")).hexdigest()[:_HASH_LENGTH]
    return f"{_extract_safe_name(name, max_length - (_HASH_LENGTH + 3))}---{digest}"


def safe_slug(name: str, max_length: int | None = None) -> str:
    """KubeSpawner 7's ``safe`` scheme: the name itself when it is a valid object name,
    else a stripped name and a hash."""
    if "--" in name:
        return _strip_and_hash(name, max_length or 32)
    if _is_valid_object_name(name) and (max_length is None or len(name) <= max_length):
        return name
    return _strip_and_hash(name, max_length or 32)


def multi_slug(names: list[str], max_length: int = 48) -> str:
    """Several names joined by ``--`` with one hash of them all at the end."""
    hasher = hashlib.sha256()
    hasher.update(names[0].encode("utf8"))
    for name in names[1:]:
        hasher.update(b"\xff")
        hasher.update(name.encode("utf8"))
    digest = hasher.hexdigest()[:_HASH_LENGTH]
    per_name = (max_length - (_HASH_LENGTH + 1)) // len(names) - 2
    return "--".join(_extract_safe_name(n, per_name) for n in names) + f"---{digest}"


def fields(user: str, server_name: str, scheme: SlugScheme = "safe") -> dict[str, str]:
    """The template fields KubeSpawner would format for this user's server."""
    safe_servername = safe_slug(server_name, _SLUG_MAX_LENGTH) if server_name else ""
    safe_username = safe_slug(user, _SLUG_MAX_LENGTH)
    if len(safe_username) + len(safe_servername) + 2 > _SLUG_MAX_LENGTH:
        safe_user_server = multi_slug([user, server_name], _SLUG_MAX_LENGTH)
    elif server_name:
        safe_user_server = f"{safe_username}--{safe_servername}"
    else:
        safe_user_server = safe_username
    escaped_username = escape_slug(user)
    escaped_servername = escape_slug(server_name)
    if scheme == "safe":
        username, servername, user_server = safe_username, safe_servername, safe_user_server
    else:
        username, servername = escaped_username, escaped_servername
        user_server = (
            f"{escaped_username}--{escaped_servername}" if escaped_servername else escaped_username
        )
    return {
        "unescaped_username": user,
        "unescaped_servername": server_name,
        "username": username,
        "servername": servername,
        "user_server": user_server,
        "safe_username": safe_username,
        "safe_servername": safe_servername,
        "safe_user_server": safe_user_server,
        "escaped_username": escaped_username,
        "escaped_servername": escaped_servername,
        "escaped_user_server": f"{escaped_username}--{escaped_servername}",
    }


@dataclass(frozen=True)
class PodNames:
    """Pod names from a template, as KubeSpawner makes them."""

    template: str = DEFAULT_TEMPLATE
    scheme: SlugScheme = "safe"

    def __post_init__(self) -> None:
        used = {f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None}
        unknown = sorted(used - FIELDS)
        if unknown:
            raise ValueError(
                f"{self.template!r} uses {', '.join('{' + f + '}' for f in unknown)}, which "
                "the Hub's API does not give; use {user_server}, {username}, {servername} "
                "or their safe_/escaped_/unescaped_ forms"
            )

    def pod_name(self, user: str, server_name: str) -> str:
        rendered = self.template.format(**fields(user, server_name, self.scheme))
        return rendered if self.template.endswith("-") else rendered.rstrip("-")
