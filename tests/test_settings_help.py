"""What ``--help-all`` and the docs say of each setting is what the code does.

An admin reads a setting's help (``jupyter server --help-all``, ``python -m
jupyter_gpucost.hub --help-all``) or the docs' tables, and acts on them. So, for every
setting of ``c.GpuCost`` and ``c.GpuCostHub``:

- the ``Default:`` line the help prints is the value the setting really takes when nothing
  is configured (no environment either);
- every value the setting accepts, where it accepts a few words, is named in its help, and a
  number's limits are stated in its help, as the check that refuses a value words them;
- no amount is said to be in dollars: amounts are in the session's (or hub's) currency;
- the docs' settings tables list every setting, with the same default, and no other.

The accepted words and limits are read from the checks themselves (a setting is given a
value out of bounds and the refusal's sentence is read), so the help is compared with what
the code enforces, not with a second list kept by hand.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from traitlets import Float, HasTraits, Int, TraitError, TraitType, Unicode
from traitlets.config import Configurable

from jupyter_gpucost.hub.app import GpuCostHub
from jupyter_gpucost.hub.model import HubConfigError
from jupyter_gpucost.server.app import GpuCost

DOCS = Path(__file__).resolve().parents[1] / "docs"
PACKAGE = "jupyter_gpucost"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defaults as they are with nothing set: no spawner's or Hub's variables."""
    import os

    for name in list(os.environ):
        if name.startswith(("GPUCOST_", "JUPYTERHUB_", "LAMBDA_API_KEY")):
            monkeypatch.delenv(name)


def ours(cls: type[Configurable]) -> dict[str, TraitType[object, object]]:
    """The configurable settings this package defines or gives a default of its own."""
    found: dict[str, TraitType[object, object]] = {}
    for name, trait in cls.class_traits(config=True).items():
        defined = getattr(trait, "this_class", None)
        module = getattr(defined, "__module__", "") or ""
        own_default = any(
            name in getattr(klass, "_trait_default_generators", {})
            for klass in cls.__mro__
            if (getattr(klass, "__module__", "") or "").startswith(PACKAGE)
        )
        if module.startswith(PACKAGE) or own_default:
            found[name] = trait
    return found


def server_settings() -> dict[str, TraitType[object, object]]:
    return ours(GpuCost)


def hub_settings() -> dict[str, TraitType[object, object]]:
    return ours(GpuCostHub)


def help_of(cls: type[Configurable], name: str) -> str:
    """What ``--help-all`` prints for the setting, joined into one line."""
    text = cls.class_get_trait_help(cls.class_traits()[name])
    return " ".join(text.split())


def printed_default(cls: type[Configurable], name: str) -> str | None:
    """The ``Default:`` line traitlets prints; the help's own words never say "Default:"
    (a second one, in prose, would be what contradicts the printed one)."""
    text = help_of(cls, name)
    assert text.count("Default:") <= 1, f"{cls.__name__}.{name}: {text}"
    match = re.search(r"Default: (.*?)(?: Choices: .*)?$", text)
    return match.group(1) if match else None


def same_repr(shown: str, real: object) -> bool:
    if shown == repr(real):
        return True
    if isinstance(real, float) and not isinstance(real, bool):
        try:
            return float(shown) == real
        except ValueError:
            return False
    return False


def test_the_classes_have_the_settings_the_docs_speak_of() -> None:
    # the walk below is over the real settings, not an empty list
    assert {"telemetry", "budget_action", "budget_grace_s", "hard_budget_scope"} <= set(
        server_settings()
    )
    assert {"grace_s", "price_provider", "log_level", "identity_cache_s"} <= set(hub_settings())
    assert len(server_settings()) > 60
    assert len(hub_settings()) > 30


@pytest.mark.parametrize(
    ("cls", "name"),
    [(GpuCost, n) for n in sorted(server_settings())]
    + [(GpuCostHub, n) for n in sorted(hub_settings())],
)
def test_the_help_prints_the_real_default(cls: type[Configurable], name: str) -> None:
    real = getattr(cls(), name)
    shown = printed_default(cls, name)
    assert shown is not None, f"{cls.__name__}.{name}: the help prints no default"
    assert same_repr(shown, real), (
        f"{cls.__name__}.{name}: --help-all says the default is {shown}, "
        f"but with nothing configured it is {real!r}"
    )


# -- what a setting accepts ---------------------------------------------------------------


def refusal(cls: type[Configurable], name: str, value: object) -> str | None:
    """The sentence with which the setting's check refuses ``value``, or None if taken."""
    app = cls()
    try:
        setattr(app, name, value)
    except TraitError as e:
        return str(e)
    if isinstance(app, GpuCostHub):
        app.hub_api_token = "x" * 32
        try:
            app.settings()
        except HubConfigError as e:
            return str(e)
        except TraitError as e:
            return str(e)
    return None


def accepted_words(message: str) -> list[str]:
    """``use one of a, b, c`` / ``must be one of a, b, c, not x`` / ``use a or b`` → the
    words; [] when the
    refusal asks for something else (a number, a URL)."""
    match = re.search(r"\b(?:use|must be) (?:one of )?(.+?)(?:[.;:(]|, not |$)", message)
    if not match:
        return []
    phrase = match.group(1).split(" or leave")[0]
    parts = [p.strip(" '") for p in re.split(r", | or ", phrase)]
    if len(parts) < 2 or not all(re.fullmatch(r"[a-z][\w\-]*", p) for p in parts):
        return []
    return parts


def numbers_in(text: str) -> set[float]:
    return {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}


def enumerated(cls: type[Configurable]) -> Iterator[tuple[str, list[str]]]:
    settings = server_settings() if cls is GpuCost else hub_settings()
    for name, trait in sorted(settings.items()):
        if isinstance(trait, Unicode):
            message = refusal(cls, name, "no-such-value-zz")
            words = accepted_words(message or "")
            if words and name in (message or ""):
                yield name, words


def bounded(cls: type[Configurable]) -> Iterator[tuple[str, str]]:
    settings = server_settings() if cls is GpuCost else hub_settings()
    for name, trait in sorted(settings.items()):
        if isinstance(trait, Int | Float) and not getattr(trait, "allow_none", False):
            for probe in (10**12, -(10**12)):
                message = refusal(cls, name, type(trait.default_value)(probe))
                if message and name in message and "use" in message:
                    yield name, message.split("use", 1)[1]
                    break


SERVER_WORDS = dict(enumerated(GpuCost))
HUB_WORDS = dict(enumerated(GpuCostHub))
SERVER_LIMITS = dict(bounded(GpuCost))
HUB_LIMITS = dict(bounded(GpuCostHub))


def test_the_checks_were_read() -> None:
    # the probes found the settings known to take a few words or a bounded number
    assert {"telemetry", "budget_action", "hard_budget_scope", "idle_gpu_action"} <= set(
        SERVER_WORDS
    )
    assert "stop-instance" in SERVER_WORDS["budget_action"]
    assert {"price_market", "price_provider"} <= set(HUB_WORDS)
    assert {"sample_interval_s", "budget_grace_s", "ledger_flush_interval_s"} <= set(SERVER_LIMITS)
    assert {"grace_s", "poll_interval_s", "identity_cache_s"} <= set(HUB_LIMITS)


@pytest.mark.parametrize(
    ("cls", "name", "words"),
    [(GpuCost, n, w) for n, w in SERVER_WORDS.items()]
    + [(GpuCostHub, n, w) for n, w in HUB_WORDS.items()],
)
def test_the_help_names_every_accepted_word(
    cls: type[Configurable], name: str, words: list[str]
) -> None:
    text = help_of(cls, name)
    missing = [w for w in words if not re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text)]
    assert missing == [], f"{cls.__name__}.{name}: the help does not name {missing}: {text}"


@pytest.mark.parametrize(
    ("cls", "name", "limits"),
    [(GpuCost, n, w) for n, w in SERVER_LIMITS.items()]
    + [(GpuCostHub, n, w) for n, w in HUB_LIMITS.items()],
)
def test_the_help_states_a_numbers_limits(cls: type[Configurable], name: str, limits: str) -> None:
    text = help_of(cls, name).split("Default:")[0]
    stated = numbers_in(text)
    missing = sorted(numbers_in(limits) - stated)
    assert missing == [], f"{cls.__name__}.{name}: the help does not state {missing}: {text}"


@pytest.mark.parametrize(
    ("cls", "name"),
    [(GpuCost, n) for n in sorted(server_settings())]
    + [(GpuCostHub, n) for n in sorted(hub_settings())],
)
def test_no_amount_is_said_to_be_in_dollars(cls: type[Configurable], name: str) -> None:
    text = help_of(cls, name).split("Default:")[0]
    # "(in US dollars)" of a catalog's rows is a fact; an amount "in dollars" is not
    assert not re.search(r"\b(?:in|of) dollars\b|\bUSD (?:per|a)\b|\(USD\b", text), text


# -- the docs' tables -----------------------------------------------------------------------


def doc_tables(path: Path) -> Iterator[tuple[str, list[str]]]:
    """(section text, rows) of every ``| setting | default |`` table of a doc."""
    section: list[str] = []
    rows: list[str] = []
    in_table = False
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            section = []
        if line.startswith("| setting | default |"):
            in_table, rows = True, []
            continue
        if in_table:
            if line.startswith("|"):
                if not line.startswith("| ---"):
                    rows.append(line)
                continue
            yield " ".join(section), rows
            in_table = False
        section.append(line)
    if in_table:
        yield " ".join(section), rows


def documented() -> tuple[dict[str, str], dict[str, str]]:
    """Setting → its row's default cell, for the server and the hub."""
    server: dict[str, str] = {}
    hub: dict[str, str] = {}
    for doc in sorted(DOCS.glob("*.md")):
        for section, rows in doc_tables(doc):
            if "Settings Editor" in section:
                continue  # the front end's settings (labextension/schema)
            table = hub if doc.name == "jupyterhub.md" or "c.GpuCostHub" in section else server
            for row in rows:
                cells = [c.strip() for c in row.strip("|").split("|")]
                for name in re.findall(r"`(\w+)`", cells[0]):
                    table[name] = cells[1]
    return server, hub


SERVER_DOC, HUB_DOC = documented()


def literal(cell: str) -> object:
    """The default a docs cell states: its first `code` span, as a Python literal."""
    match = re.search(r"`([^`]*)`", cell)
    assert match, cell
    text = match.group(1)
    for word, value in (("true", "True"), ("false", "False"), ("null", "None")):
        text = re.sub(rf"\b{word}\b", value, text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def same(documented_value: object, real: object) -> bool:
    if isinstance(real, bool) or isinstance(documented_value, bool):
        return documented_value is real
    if isinstance(real, int | float) and isinstance(documented_value, int | float):
        return float(real) == float(documented_value)
    if isinstance(real, set | frozenset) and isinstance(documented_value, list | set | dict):
        return set(documented_value) == set(real)
    return documented_value == real


@pytest.mark.parametrize(
    ("cls", "settings", "doc"),
    [(GpuCost, server_settings(), SERVER_DOC), (GpuCostHub, hub_settings(), HUB_DOC)],
)
def test_the_docs_tables_list_every_setting_and_no_other(
    cls: type[HasTraits], settings: dict[str, object], doc: dict[str, str]
) -> None:
    assert sorted(set(settings) - set(doc)) == [], f"{cls.__name__}: not in the docs' tables"
    assert sorted(set(doc) - set(settings)) == [], f"the docs' tables name no {cls.__name__}"


@pytest.mark.parametrize(
    ("cls", "name"),
    [(GpuCost, n) for n in sorted(set(server_settings()) & set(SERVER_DOC))]
    + [(GpuCostHub, n) for n in sorted(set(hub_settings()) & set(HUB_DOC))],
)
def test_the_docs_state_the_real_default(cls: type[Configurable], name: str) -> None:
    cell = (SERVER_DOC if cls is GpuCost else HUB_DOC)[name]
    real = getattr(cls(), name)
    if callable(real):
        pytest.fail(f"{name}: a callable default")
    assert same(literal(cell), real), f"{cls.__name__}.{name}: the docs say {cell}, it is {real!r}"
