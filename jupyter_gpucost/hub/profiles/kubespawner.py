"""KubeSpawner's ``profile_list`` as KubeSpawner itself reads it, for pricing.

A copy of what ``kubespawner/spawner.py`` (7.x) does between a spawn request and the pod,
limited to the settings that decide a server's GPUs:

* ``_get_initialized_profile_list``: a dict of profiles is its values sorted by key; a
  profile with no ``slug`` gets ``slugify(display_name)``; an option with ``choices`` and
  no default choice makes its first choice the default; with no default profile, the
  first profile is the default;
* ``_validate_user_options``: with a truthy ``user_options["profile"]``, the profile must
  exist, and an ``"<option>--unlisted-choice"`` text needs its option's
  ``unlisted_choice.enabled`` and must ``re.match`` its ``validation_regex``;
* ``_load_profile``: the profile's ``kubespawner_override`` first, then for each of its
  ``profile_options`` in order: the unlisted choice's override with ``{value}`` replaced
  by the user's text (``recursive_format``), else the chosen choice's, else the default
  choice's; each override merged into the spawner's settings with ``recursive_update``
  (dicts merged recursively, ``None`` removes a key; anything else replaced).

What KubeSpawner refuses (an unknown profile or choice, an unlisted choice not enabled or
not matching its regex) is a :class:`OptionsRefused`: such a server never starts.

A value that cannot be known without running the admin's code (a callable
``kubespawner_override`` value, or a ``profile_list`` that is itself a callable) is an
:class:`Unreadable`; the pricing says so rather than guessing.

Pure: no I/O.
"""

from __future__ import annotations

import copy
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import product

#: the spawner settings that decide a server's GPUs (the rest of an override is ignored)
DICT_SETTINGS = ("extra_resource_limits", "extra_resource_guarantees", "node_selector")
LIST_SETTINGS = ("node_affinity_required",)
#: node labels some configs write directly under ``kubespawner_override`` (KubeSpawner
#: sets them as attributes that change nothing; they are read as the admin's intent)
DIRECT_LABELS = (
    "node.kubernetes.io/instance-type",
    "cloud.google.com/gke-accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
    "nvidia.com/gpu.product",
)
GPU_SETTINGS = (*DICT_SETTINGS, *LIST_SETTINGS, *DIRECT_LABELS)
#: the longest unlisted-choice text priced (a longer one is refused as a forgery)
MAX_TEXT = 256
#: the most option combinations of one profile enumerated at start
MAX_COMBINATIONS = 4096

State = dict[str, object]


class ProfileListError(ValueError):
    """The profile list cannot be read the way KubeSpawner reads it."""


class OptionsRefused(ValueError):
    """KubeSpawner would refuse to start a server with these ``user_options``."""


@dataclass(frozen=True)
class Unreadable:
    """A value that only the admin's code knows (a callable): ``what`` says which."""

    what: str

    def __str__(self) -> str:
        return f"<{self.what}>"


@dataclass(frozen=True)
class Selection:
    """A profile and what was chosen for each of its options."""

    slug: str
    #: (option, choice key) in the profile's order; the choice is ``UNLISTED`` for an
    #: unlisted choice (its text in ``text``)
    choices: tuple[tuple[str, str], ...] = ()
    #: the unlisted choices' texts by option
    texts: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return (self.slug, self.choices)

    def label(self) -> str:
        """``gpu=a100, image=(unlisted)``; ``-`` for a profile with no options."""
        return ", ".join(f"{o}={c}" for o, c in self.choices) or "-"


UNLISTED = "(unlisted)"


def slugify(text: str) -> str:
    """python-slugify's ``slugify`` with its defaults, for the text of a display name:
    ASCII (accents dropped), lower case, quotes removed, runs of other characters as
    one ``-``, no ``-`` at either end."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    ascii_text = re.sub(r"['\"]+", "", ascii_text.lower())
    return re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")


def initialized(profile_list: object) -> list[dict[str, object]]:
    """KubeSpawner's ``_sorted_dict_values`` then ``_get_initialized_profile_list``."""
    if isinstance(profile_list, Mapping):
        profile_list = [profile_list[k] for k in sorted(profile_list, key=str)]
    if not isinstance(profile_list, list | tuple):
        raise ProfileListError(
            f"profile_list is a {type(profile_list).__name__}; KubeSpawner takes a list "
            "or a dict of profiles"
        )
    profiles = copy.deepcopy(list(profile_list))
    for number, profile in enumerate(profiles, 1):
        if isinstance(profile, Unreadable):
            raise ProfileListError(f"profile {number} cannot be read statically ({profile.what})")
        if not isinstance(profile, dict):
            raise ProfileListError(f"profile {number} is not a mapping")
        _readable(profile.get("slug"), f"profile {number}: slug")
        if "slug" not in profile:
            name = profile.get("display_name")
            _readable(name, f"profile {number}: display_name")
            if not isinstance(name, str):
                raise ProfileListError(f"profile {number} has neither a slug nor a display_name")
            profile["slug"] = slugify(name)
        if not isinstance(profile["slug"], str):
            raise ProfileListError(f"profile {number}: slug {profile['slug']!r} is not text")
        slug = profile["slug"]
        options = profile.get("profile_options") or {}
        _readable(options, f"profile {slug!r}: profile_options")
        if not isinstance(options, dict):
            raise ProfileListError(f"profile {profile['slug']!r}: profile_options is not a mapping")
        for name, option in options.items():
            if not isinstance(option, dict):
                raise ProfileListError(f"profile {slug!r}: option {name!r} is not a mapping")
            choices = option.get("choices")
            _readable(choices, f"profile {slug!r}: option {name!r}: choices")
            _readable(option.get("unlisted_choice"), f"profile {slug!r}: option {name!r}")
            if choices is not None and not isinstance(choices, dict):
                raise ProfileListError(
                    f"profile {profile['slug']!r}: option {name!r}: choices is not a mapping"
                )
            if choices and not any(_is_dict(c) and c.get("default") for c in choices.values()):
                first = next(iter(choices))
                if not isinstance(choices[first], dict):
                    raise ProfileListError(
                        f"profile {profile['slug']!r}: choice {first!r} is not a mapping"
                    )
                choices[first]["default"] = True
            unlisted = option.setdefault("unlisted_choice", {})
            if not isinstance(unlisted, dict):
                raise ProfileListError(
                    f"profile {slug!r}: option {name!r}: unlisted_choice is not a mapping"
                )
            unlisted.setdefault("enabled", False)
    if profiles and not any(p.get("default") for p in profiles):
        profiles[0]["default"] = True
    return profiles


def _readable(value: object, what: str) -> None:
    if isinstance(value, Unreadable):
        raise ProfileListError(f"{what} cannot be read statically ({value.what})")


def _is_dict(value: object) -> bool:
    return isinstance(value, dict)


def get_profile(slug: object, profiles: list[dict[str, object]]) -> dict[str, object]:
    """KubeSpawner's ``_get_profile``: the default profile for a falsy slug."""
    if not slug:
        return next(p for p in profiles if p.get("default"))
    for profile in profiles:
        if profile["slug"] == slug:
            return profile
    raise OptionsRefused(f"no profile {_short(slug)}")


def _options(profile: Mapping[str, object]) -> dict[str, dict[str, object]]:
    options = profile.get("profile_options") or {}
    assert isinstance(options, dict)
    return options


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate(user_options: Mapping[str, object], profiles: list[dict[str, object]]) -> None:
    """KubeSpawner's ``_validate_user_options``."""
    if not user_options:
        return
    slug = user_options.get("profile")
    if not slug:
        return
    profile = get_profile(slug, profiles)
    for name, option in _options(profile).items():
        text = user_options.get(f"{name}--unlisted-choice")
        choice = user_options.get(name)
        if not (text or choice):
            continue
        if text:
            unlisted = option.get("unlisted_choice")
            assert isinstance(unlisted, dict)
            if not unlisted.get("enabled"):
                raise OptionsRefused(f"an unlisted choice for {name!r}, which takes none")
            regex = unlisted.get("validation_regex")
            if regex:
                if not isinstance(text, str) or len(text) > MAX_TEXT:
                    raise OptionsRefused(f"an unlisted choice for {name!r} that is not short text")
                if not re.match(str(regex), text):
                    raise OptionsRefused(f"an unlisted choice for {name!r} that fails its regex")


def recursive_update(target: dict[str, object], new: Mapping[str, object]) -> None:
    """KubeSpawner's ``recursive_update``: ``None`` removes a key."""
    for k, v in new.items():
        if isinstance(v, dict):
            if not isinstance(target.get(k), dict):
                target[k] = {}
            inner = target[k]
            assert isinstance(inner, dict)
            recursive_update(inner, v)
        elif v is None:
            target.pop(k, None)
        else:
            target[k] = v


def recursive_format(value: object, text: str) -> object:
    """KubeSpawner's ``recursive_format(value, value=text)``: ``{value}`` replaced in
    every string (keys included); other ``{...}`` left as they are."""
    if isinstance(value, str):
        return value.format_map(_Missing(value=text))
    if isinstance(value, list):
        return [recursive_format(v, text) for v in value]
    if isinstance(value, dict):
        return {recursive_format(k, text): recursive_format(v, text) for k, v in value.items()}
    return value


class _Missing(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def apply_overrides(state: State, override: object, where: str) -> None:
    """KubeSpawner's ``_apply_overrides`` for the GPU settings: a dict merged into a dict
    setting, anything else replacing it; a callable is :class:`Unreadable`."""
    if override is None:
        return
    if isinstance(override, Unreadable):
        for name in GPU_SETTINGS:
            state[name] = Unreadable(f"{where} is {override.what}")
        return
    if not isinstance(override, Mapping):
        raise ProfileListError(f"{where} is not a mapping")
    for name, value in override.items():
        if name not in GPU_SETTINGS:
            continue
        if isinstance(value, Unreadable) or callable(value):
            what = value.what if isinstance(value, Unreadable) else "a callable"
            state[name] = Unreadable(f"{where}: kubespawner_override {name} is {what}")
        elif isinstance(value, dict) and isinstance(state.get(name), Unreadable):
            pass  # merged into a value only code knows: still unknown
        elif isinstance(value, dict) and isinstance(state.get(name), dict):
            current = state[name]
            assert isinstance(current, dict)
            recursive_update(current, value)
        else:
            state[name] = copy.deepcopy(value)


def base_state(base: Mapping[str, object]) -> State:
    """The spawner's own settings (``c.KubeSpawner.node_selector`` ...), before any profile."""
    state: State = {name: {} for name in DICT_SETTINGS}
    state.update({name: [] for name in LIST_SETTINGS})
    for name, value in base.items():
        if name in GPU_SETTINGS:
            state[name] = copy.deepcopy(value)
    return state


def load(
    user_options: Mapping[str, object],
    profiles: list[dict[str, object]],
    base: Mapping[str, object],
    *,
    checked: bool = True,
) -> tuple[Selection, State]:
    """What KubeSpawner's ``load_user_options`` makes of ``user_options``: the selection
    and the GPU settings of the pod. :class:`OptionsRefused` where KubeSpawner refuses.
    ``checked=False`` skips the unlisted choices' regexes (to enumerate a profile list
    with a placeholder text)."""
    state = base_state(base)
    if not profiles:
        return Selection(""), state
    if checked:
        validate(user_options, profiles)
    profile = get_profile(user_options.get("profile"), profiles)
    slug = str(profile["slug"])
    apply_overrides(state, profile.get("kubespawner_override"), f"profile {slug!r}")
    chosen: list[tuple[str, str]] = []
    texts: list[tuple[str, str]] = []
    for name, option in _options(profile).items():
        text = user_options.get(f"{name}--unlisted-choice")
        choice = user_options.get(name)
        where = f"profile {slug!r} option {name!r}"
        if text:
            if not isinstance(text, str) or len(text) > MAX_TEXT:
                raise OptionsRefused(f"an unlisted choice for {name!r} that is not short text")
            unlisted = option.get("unlisted_choice")
            assert isinstance(unlisted, dict)
            if not checked and not unlisted.get("enabled"):
                raise OptionsRefused(f"an unlisted choice for {name!r}, which takes none")
            override = unlisted.get("kubespawner_override") or {}
            if isinstance(override, Mapping):
                override = {k: recursive_format(v, text) for k, v in override.items()}
            apply_overrides(state, override, f"{where} unlisted_choice")
            chosen.append((name, UNLISTED))
            texts.append((name, text))
            continue
        choices = option.get("choices")
        if choice:
            if not isinstance(choices, dict):
                raise OptionsRefused(f"a choice for {name!r}, which lists none")
            if not isinstance(choice, str) or choice not in choices:
                raise OptionsRefused(f"no choice {_short(choice)} for {name!r}")
            key = choice
        else:
            if not isinstance(choices, dict) or not choices:
                raise OptionsRefused(f"no default choice for {name!r}")
            key = next(k for k, c in choices.items() if _is_dict(c) and c.get("default"))
        picked = choices[key]
        if not isinstance(picked, dict):
            raise ProfileListError(f"{where} choice {key!r} is not a mapping")
        apply_overrides(state, picked.get("kubespawner_override"), f"{where} choice {key!r}")
        chosen.append((name, str(key)))
    return Selection(slug, tuple(chosen), tuple(texts)), state


def every_selection(
    profiles: list[dict[str, object]], *, text: str = "{value}"
) -> Iterator[dict[str, object]]:
    """The ``user_options`` of every profile × every combination of its options' choices
    (an enabled unlisted choice with ``text``), in the profile list's order."""
    if not profiles:
        yield {}
        return
    for profile in profiles:
        slug = profile["slug"]
        alternatives: list[list[tuple[str, str, bool]]] = []
        for name, option in _options(profile).items():
            choices = option.get("choices") or {}
            assert isinstance(choices, dict)
            these = [(name, str(k), False) for k in choices]
            unlisted = option.get("unlisted_choice")
            if isinstance(unlisted, dict) and unlisted.get("enabled"):
                these.append((name, text, True))
            alternatives.append(these)
        count = 1
        for these in alternatives:
            count *= max(len(these), 1)
        if count > MAX_COMBINATIONS:
            raise ProfileListError(
                f"profile {slug!r} has {count} combinations of option choices; at most "
                f"{MAX_COMBINATIONS} are priced"
            )
        for combo in product(*[a for a in alternatives if a]):
            options: dict[str, object] = {"profile": slug}
            for name, value, unlisted in combo:
                options[f"{name}--unlisted-choice" if unlisted else name] = value
            yield options


def uses_text(profiles: list[dict[str, object]], slug: str, option: str) -> bool:
    """Whether an option's unlisted choice puts the user's text into a GPU setting."""
    profile = get_profile(slug, profiles)
    unlisted = _options(profile)[option].get("unlisted_choice")
    if not isinstance(unlisted, dict):
        return False
    override = unlisted.get("kubespawner_override") or {}
    if not isinstance(override, Mapping):
        return False
    return any(name in GPU_SETTINGS and "{value}" in repr(v) for name, v in override.items())
