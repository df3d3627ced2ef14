"""The translations' tools: extract every message, merge it into each language, compile.

    python scripts/i18n.py extract   # sources -> jupyter_gpucost/locale/jupyter_gpucost.pot,
                                     # and new messages into every <lang>/LC_MESSAGES/*.po
    python scripts/i18n.py compile   # every .po -> the .json JupyterLab and the server read
    python scripts/i18n.py check     # exit 1, listing each message with no translation
                                     # (and a .json older than its .po)

``make i18n`` runs extract and compile; ``make i18n-check`` runs check (as
``tests/test_i18n.py`` does). Messages come from:

- the front end (``labextension/src``): ``trans.__('…')``, ``trans._n('…', '…', n)``,
  ``trans._p('context', '…')``, with one literal string per argument;
- the server and kernel (``jupyter_gpucost``): ``_("…")``, ``N_("…")``,
  ``ngettext("…", "…", n)``, ``pgettext("context", "…")`` of :mod:`jupyter_gpucost.core.i18n`;
- the hub service's page templates (``jupyter_gpucost/hub/web/templates``): ``{{ _("…") }}``,
  ``{{ ngettext("…", "…", n) }}``;
- the settings schemas (``labextension/schema``): the strings JupyterLab translates, with
  its own contexts (``schema``, ``settings``, ``toolbar``, ``menu``).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "jupyter_gpucost"
LOCALE = PACKAGE / "locale"
DOMAIN = "jupyter_gpucost"
TEMPLATE = LOCALE / f"{DOMAIN}.pot"
TS_SOURCES = ROOT / "labextension" / "src"
SCHEMAS = ROOT / "labextension" / "schema"
CONTEXT_SEPARATOR = "\x04"
#: the catalogs' header: no dates or line numbers, so that they change only with the messages
HEADER = "# jupyter-gpucost's messages. Update with `make i18n`; see docs/translations.md.\n#"
FIXED_DATE = datetime(2026, 1, 1, tzinfo=UTC)
#: the languages shipped, and their plural rule as gettext writes it
LANGUAGES = {"zh_CN": "nplurals=1; plural=0;"}

# JupyterLab's own list (jupyterlab_server.translation_utils.DEFAULT_SCHEMA_SELECTORS):
# which strings of a settings schema it translates, and in which context
SCHEMA_SELECTORS = {
    "properties/.*/title": "settings",
    "properties/.*/description": "settings",
    "definitions/.*/properties/.*/title": "settings",
    "definitions/.*/properties/.*/description": "settings",
    "title": "schema",
    "description": "schema",
    r"jupyter\.lab\.setting-icon-label": "settings",
    r"jupyter\.lab\.menus/.*/label": "menu",
    r"jupyter\.lab\.toolbars/.*/label": "toolbar",
}

_JS_STRING = r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\$]|\\.)*`"""
_TS_CALLS = (
    (re.compile(rf"\.__\(\s*({_JS_STRING})\s*[,)]"), "gettext"),
    (re.compile(rf"\._n\(\s*({_JS_STRING})\s*,\s*({_JS_STRING})\s*,"), "ngettext"),
    (re.compile(rf"\._p\(\s*({_JS_STRING})\s*,\s*({_JS_STRING})\s*[,)]"), "pgettext"),
)
_JS_ESCAPES = {"n": "\n", "t": "\t", "'": "'", '"': '"', "`": "`", "\\": "\\"}


@dataclass(frozen=True)
class Message:
    msgid: str
    plural: str | None
    context: str | None
    where: str

    @property
    def key(self) -> str:
        return f"{self.context}{CONTEXT_SEPARATOR}{self.msgid}" if self.context else self.msgid


def _js_literal(token: str) -> str:
    body = token[1:-1]
    return re.sub(r"\\(.)", lambda m: _JS_ESCAPES.get(m.group(1), m.group(1)), body)


def _ts_messages() -> Iterator[Message]:
    for path in sorted(TS_SOURCES.rglob("*.ts*")):
        if "__tests__" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        for pattern, kind in _TS_CALLS:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                where = f"{path.relative_to(ROOT)}:{line}"
                first = _js_literal(match.group(1))
                if kind == "gettext":
                    yield Message(first, None, None, where)
                elif kind == "ngettext":
                    yield Message(first, _js_literal(match.group(2)), None, where)
                else:
                    yield Message(_js_literal(match.group(2)), None, first, where)


def _py_messages() -> Iterator[Message]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if "labextension" in path.relative_to(PACKAGE).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            args = [a.value for a in node.args if isinstance(a, ast.Constant)]
            texts = [a for a in args if isinstance(a, str)]
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            name = node.func.id
            if name in ("_", "N_") and len(texts) == 1:
                yield Message(texts[0], None, None, where)
            elif name == "ngettext" and len(texts) == 2:
                yield Message(texts[0], texts[1], None, where)
            elif name == "pgettext" and len(texts) == 2:
                yield Message(texts[1], None, texts[0], where)


_TEMPLATE_CALL = re.compile(r"""\b_\(\s*("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')\s*\)""")
_TEMPLATE_STRING = r"""("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
_TEMPLATE_NGETTEXT = re.compile(rf"\bngettext\(\s*{_TEMPLATE_STRING}\s*,\s*{_TEMPLATE_STRING}\s*,")


def _template_messages() -> Iterator[Message]:
    """``{{ _("Today") }}`` and ``{{ ngettext("…", "…", n) }}`` in the hub service's page
    templates."""
    for path in sorted((PACKAGE / "hub" / "web" / "templates").glob("*.html")):
        text = path.read_text(encoding="utf-8")
        for match in _TEMPLATE_CALL.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            yield Message(_js_literal(match.group(1)), None, None, where)
        for match in _TEMPLATE_NGETTEXT.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            yield Message(_js_literal(match.group(1)), _js_literal(match.group(2)), None, where)


def _schema_strings(value: object, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _schema_strings(item, f"{path}/{key}" if path else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, dict):
                yield from _schema_strings(item, f"{path}[{i}]")
    elif isinstance(value, str):
        yield path, value


def _schema_messages() -> Iterator[Message]:
    selectors = [(re.compile(f"^{p}$"), c) for p, c in SCHEMA_SELECTORS.items()]
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        for where, text in _schema_strings(schema, ""):
            for pattern, context in selectors:
                if pattern.fullmatch(where) and text:
                    yield Message(text, None, context, f"{path.relative_to(ROOT)}#/{where}")
                    break


def extract() -> list[Message]:
    """Every message of the sources, once each (the first place it is used)."""
    seen: dict[str, Message] = {}
    for message in (*_ts_messages(), *_py_messages(), *_template_messages(), *_schema_messages()):
        seen.setdefault(message.key, message)
    return list(seen.values())


def _template(messages: list[Message]) -> Catalog:
    catalog = Catalog(
        domain=DOMAIN,
        project="jupyter-gpucost",
        fuzzy=False,
        header_comment=HEADER,
        creation_date=FIXED_DATE,
        revision_date=FIXED_DATE,
    )
    for m in messages:
        msgid = (m.msgid, m.plural) if m.plural else m.msgid
        # the file only: a line number would change with every edit around it
        where = m.where.split(":")[0].split("#")[0]
        catalog.add(msgid, locations=[(where, None)], context=m.context)  # type: ignore[list-item]
    return catalog


def po_path(language: str) -> Path:
    return LOCALE / language / "LC_MESSAGES" / f"{DOMAIN}.po"


def json_path(language: str) -> Path:
    return LOCALE / language / "LC_MESSAGES" / f"{DOMAIN}.json"


def _read(language: str) -> Catalog:
    path = po_path(language)
    if not path.exists():
        return Catalog(
            locale=language,
            domain=DOMAIN,
            project="jupyter-gpucost",
            header_comment=HEADER,
            creation_date=FIXED_DATE,
            revision_date=FIXED_DATE,
        )
    with path.open("rb") as f:
        return read_po(f, locale=language, domain=DOMAIN)


def _write(path: Path, catalog: Catalog) -> None:
    """Write the catalog, replacing the file only once it is written whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as f:
        write_po(f, catalog, width=100, sort_output=False, include_lineno=False)
    partial.replace(path)


def cmd_extract() -> None:
    template = _template(extract())
    _write(TEMPLATE, template)
    for language in LANGUAGES:
        catalog = _read(language)
        catalog.update(template, no_fuzzy_matching=True, update_creation_date=False)
        catalog.obsolete.clear()
        catalog.header_comment = HEADER
        catalog.fuzzy = False
        catalog.creation_date = catalog.revision_date = FIXED_DATE
        catalog.last_translator = catalog.language_team = "jupyter-gpucost"
        catalog.msgid_bugs_address = ""
        _write(po_path(language), catalog)


def compiled(language: str) -> dict[str, object]:
    """A language's .po as JupyterLab's JSON: ``{"": header, key: [forms…]}``, translated
    messages only."""
    catalog = _read(language)
    data: dict[str, object] = {
        "": {
            "domain": DOMAIN,
            "language": language.replace("_", "-"),
            "plural_forms": LANGUAGES[language],
            "version": "jupyter_gpucost",
        }
    }
    for message in catalog:
        if not message.id or message.fuzzy:
            continue
        string = message.string
        forms = [string] if isinstance(string, str) else list(string or ())
        if not forms or not all(isinstance(f, str) and f for f in forms):
            continue
        msgid = message.id[0] if message.pluralizable else message.id
        key = f"{message.context}{CONTEXT_SEPARATOR}{msgid}" if message.context else msgid
        data[str(key)] = [str(f) for f in forms]
    return data


def _dump(data: dict[str, object]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def cmd_compile() -> None:
    for language in LANGUAGES:
        json_path(language).write_text(_dump(compiled(language)), encoding="utf-8")


def untranslated(language: str) -> list[Message]:
    """The messages of the sources that ``language`` does not translate."""
    done = compiled(language)
    return [m for m in extract() if m.key not in done]


def stale(language: str) -> bool:
    """Whether the shipped .json is not the compiled .po."""
    path = json_path(language)
    return not path.exists() or path.read_text(encoding="utf-8") != _dump(compiled(language))


def report() -> list[str]:
    lines = []
    for language in LANGUAGES:
        for m in untranslated(language):
            what = f"{m.context} | {m.msgid}" if m.context else m.msgid
            lines.append(f"{language}: no translation: {what!r} ({m.where})")
        if stale(language):
            lines.append(f"{language}: {json_path(language).relative_to(ROOT)} is stale")
    return lines


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else ""
    if command == "extract":
        cmd_extract()
    elif command == "compile":
        cmd_compile()
    elif command == "check":
        lines = report()
        print("\n".join(lines) or "every message is translated")
        if lines:
            print("fix: make i18n, translate the empty msgstr in the .po files, make i18n")
        return 1 if lines else 0
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
