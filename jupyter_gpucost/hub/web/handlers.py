"""The service's HTTP endpoints: thin tornado handlers over :mod:`..service` and :mod:`.views`.

Who may call what:

* ``POST api/report`` — a single-user server, with its own Hub token
  (``Authorization: token …``) carrying ``custom:gpucost:report`` for its user; the Hub
  names the user and the token's scopes. No cookies: no XSRF to check.
  The service's hot path, so a plain callable route (:mod:`.report_route`), not a handler.
* ``GET /``, ``GET admin`` — pages behind Hub OAuth (``HubOAuthenticated``); the admin page
  answers 403 to a user who is not an admin of the service.
* ``GET api/me`` — the user's own figures (OAuth cookie or a Hub token of the user).
* ``GET api/admin/summary``, ``GET api/admin/users.csv``, ``GET
  api/admin/allowance-requests.csv``, ``GET metrics`` — an admin of the
  service only: a Hub admin, one of ``admin_users`` / ``admin_groups``, or an owner of the
  ``custom:gpucost:admin`` scope (a Prometheus service gets a token with that scope).
* ``GET api/users/{name}/allowance`` — the Hub's ``pre_spawn_hook``, and
  ``GET api/users/{name}/profiles`` — the Hub's spawn page (:mod:`..spawn_form`), with this
  service's own API token only.
* ``GET``/``POST api/allowance/requests``, ``POST api/allowance/requests/{id}`` — asking
  for more and deciding; a POST only with a Hub token in ``Authorization``, never a cookie.
* ``POST ask``, ``POST decide/{id}`` — the user page's forms for the same: the OAuth
  cookie and tornado's XSRF token (``_xsrf`` in the form, checked against the ``_xsrf``
  cookie), the same rules as the API.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import jinja2
from jupyterhub.services.auth import (  # type: ignore[import-untyped]
    HubOAuth,
    HubOAuthCallbackHandler,
    HubOAuthenticated,
)
from tornado import web

from ...core.currency import in_language
from ...core.i18n import Messages, accept_language, messages_for
from ...core.refusal import Refusal, hub_error_body
from ...core.wire import AlertsSummary
from ..alerting import HubAlerts
from ..budgets import spawn_refusal
from ..ledger.requests import RequestStore
from ..model import HubLedgerDown
from ..service import HubService
from . import allowance_view, asking_view, billed_view, metrics_view, views
from .hubapi import HubApi, Identity
from .page_render import render
from .page_render import templates as templates
from .ratelimit import RateLimit
from .report_route import ReportRoute, bearer_token, report_path

log = logging.getLogger("jupyter_gpucost.hub")

HERE = Path(__file__).parent
ADMIN_SCOPE = "custom:gpucost:admin"


@dataclass
class HandlerContext:
    """What every handler reads (``settings["gpucost"]``)."""

    service: HubService
    hub: HubApi
    hub_auth: Any
    now: Callable[[], datetime]
    today: Callable[[], date]
    service_token: str
    admin_users: frozenset[str]
    admin_groups: frozenset[str]
    hub_admins_are_admins: bool
    max_report_bytes: int
    templates: jinja2.Environment
    report_limit: RateLimit
    #: ``None``: no ``c.GpuCostHub.notify``
    alerts: HubAlerts | None = None
    #: requests for more allowance (``None``: not kept)
    requests: RequestStore | None = None
    requests_per_week: int = 3

    def alerts_page(self) -> AlertsSummary:
        """The last alerts and failed deliveries, targets masked (admins only)."""
        return {"recent": [], "failed": []} if self.alerts is None else self.alerts.page()

    def currency_symbol(self) -> str:
        """The symbol of the hub's currency, as the pages write it."""
        return str(self.templates.globals.get("currency_symbol", "$"))

    def is_admin(self, user: Identity) -> bool:
        if ADMIN_SCOPE in user.scopes:
            return True
        if user.kind != "user":
            return False
        return (
            (self.hub_admins_are_admins and user.admin)
            or user.name in self.admin_users
            or bool(self.admin_groups.intersection(user.groups))
        )


def identity_of(model: dict[str, Any]) -> Identity:
    return Identity(
        kind=str(model.get("kind", "user")),
        name=str(model["name"]),
        admin=bool(model.get("admin")),
        groups=tuple(str(g) for g in model.get("groups") or ()),
        scopes=frozenset(str(s) for s in model.get("scopes") or ()),
    )


class Base(web.RequestHandler):
    @property
    def ctx(self) -> HandlerContext:
        ctx: HandlerContext = self.settings["gpucost"]
        return ctx

    def set_default_headers(self) -> None:
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Cache-Control", "no-store")

    def words(self) -> Messages:
        """The messages in the language the browser asks for (English when none)."""
        return messages_for(accept_language(self.request.headers.get("Accept-Language", "")))

    def write_json(self, doc: object, code: int = 200) -> None:
        self.set_status(code)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(doc))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        reason = self._reason
        exc = kwargs.get("exc_info")
        if exc is not None and isinstance(exc[1], web.HTTPError) and exc[1].log_message:
            reason = exc[1].log_message % exc[1].args if exc[1].args else exc[1].log_message
        if exc is not None and isinstance(exc[1], Refusal):
            # a refusal a handler did not answer itself: its status, its sentence
            status_code = exc[1].status
            self.set_status(status_code)
            reason = str(exc[1])
        if exc is not None and isinstance(exc[1], HubLedgerDown):
            # a page that must read the ledger while its database is away: a spell, not a bug
            status_code = 503
            self.set_status(status_code)
            reason = (
                "The hub's ledger cannot be reached just now; budgets and stops go on from "
                "memory. Try again when it is back."
            )
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(hub_error_body(reason, status_code)))


class TokenHandler(Base):
    """A handler that takes a Hub token in the Authorization header, never a cookie."""

    def check_xsrf_cookie(self) -> None:
        # authenticated by the Authorization header only: a browser cannot forge it
        return None

    def bearer(self) -> str:
        try:
            return bearer_token(self.request.headers.get("Authorization", ""))
        except Refusal as e:
            raise web.HTTPError(e.status, str(e)) from None


class AllowanceHandler(TokenHandler):
    """May a user start a server now? For the Hub's ``pre_spawn_hook`` (service token)."""

    async def get(self, user: str) -> None:
        if not hmac.compare_digest(self.bearer().encode(), self.ctx.service_token.encode()):
            raise web.HTTPError(403, "only the Hub's pre_spawn_hook asks this (service token)")
        groups = tuple(self.get_arguments("group"))
        service = self.ctx.service
        if groups:
            service.learn_groups(user, groups)
        budgets = [b for b in service.budgets_for(user) if b.scope in ("day", "month")]
        # the reason in the language of the user's browser, which the hook passes on
        words = self.words()
        symbol = in_language(self.ctx.currency_symbol(), words.language)
        refusal = spawn_refusal(budgets, words, symbol)
        now, profile = self.ctx.now(), self.get_argument("profile", None)
        held, left = allowance_view.allowances(service, user, profile, now, words, symbol)
        refusal = refusal or held
        if refusal is not None and self.ctx.alerts is not None:
            known = groups or service.groups_of.get(user, ())
            self.ctx.alerts.spawn_refused(user, known, budgets, self.ctx.now())
        self.write_json(
            {
                "user": user,
                "allowed": refusal is None,
                "reason": refusal,
                "budgets": [views.budget_json(b) for b in budgets],
                "allowances": left,
            }
        )


class ProfileLinesHandler(TokenHandler):
    """Each profile's price and what is left of the user's allowances at its rate, for the
    spawn page (:mod:`..spawn_form`, in the Hub; service token)."""

    async def get(self, user: str) -> None:
        if not hmac.compare_digest(self.bearer().encode(), self.ctx.service_token.encode()):
            raise web.HTTPError(403, "only the Hub's spawn page asks this (service token)")
        groups = tuple(self.get_arguments("group"))
        if groups:
            self.ctx.service.learn_groups(user, groups)
        profiles = self.get_arguments("profile")[:100]
        words = self.words()
        symbol = in_language(self.ctx.currency_symbol(), words.language)
        lines = allowance_view.profile_lines(
            self.ctx.service, user, profiles, self.ctx.now(), words, symbol
        )
        self.write_json({"user": user, "profiles": lines})


class OAuthBase(HubOAuthenticated, Base):  # type: ignore[misc]
    """Hub OAuth: a browser is sent to the Hub's login and back to ``oauth_callback``."""

    def initialize(self) -> None:
        self.hub_auth = self.ctx.hub_auth

    def user(self) -> Identity:
        model = self.current_user
        if not model:
            _ = self.words().gettext  # by this name, the catalog's tool finds the sentence
            raise web.HTTPError(401, "%s", _("Log in through the Hub first."))
        return identity_of(model)

    def admin(self) -> Identity:
        who = self.user()
        if not self.ctx.is_admin(who):
            _ = self.words().gettext
            text = _("{user} is not an admin of the GPU cost service.").format(user=who.name)
            raise web.HTTPError(403, "%s", text)
        return who


class ApiBase(OAuthBase):
    """JSON or text for a script or the pages: 401 instead of a redirect to the login."""

    def get_login_url(self) -> str:
        _ = self.words().gettext
        raise web.HTTPError(401, "%s", _("Log in through the Hub, or send a Hub token."))


class MeHandler(ApiBase):
    def get(self) -> None:
        who = self.user()
        now = self.ctx.now()
        body = views.me(self.ctx.service, who.name, now, self.ctx.today())
        words, profile = self.words(), self.get_argument("profile", None)
        symbol = in_language(self.ctx.currency_symbol(), words.language)
        # what is left of each allowance (at the rate of the profile in ?profile=)
        _, body["allowances"] = allowance_view.allowances(
            self.ctx.service, who.name, profile, now, words, symbol, who.groups
        )
        self.write_json(body)


class RequestsBase(ApiBase):
    """Requests for more allowance; a POST only with a Hub token (:func:`.asking_view.body`)."""

    def check_xsrf_cookie(self) -> None:
        return None  # a POST needs the Authorization header, which no other site can send

    def store(self) -> RequestStore:
        if self.ctx.requests is None:
            raise web.HTTPError(404, "requests for more allowance are not kept here")
        return self.ctx.requests

    def body(self) -> dict[str, object]:
        headers = self.request.headers
        return asking_view.body(headers.get("Authorization", ""), self.request.body)

    def answer(self, act: Callable[[], object], code: int = 200) -> None:
        try:
            done = act()
        except Refusal as e:
            self.write_json(hub_error_body(str(e), e.status), e.status)
            return
        self.write_json(done, code)


class RequestsHandler(RequestsBase):
    def get(self) -> None:
        who, c = self.user(), self.ctx
        groups = {g for gs in c.service.groups_of.values() for g in gs}
        self.write_json(asking_view.listing(self.store(), who, c.is_admin(who), groups, c.now()))

    def post(self) -> None:
        who, store, c, words = self.user(), self.store(), self.ctx, self.words()
        c.service.learn_groups(who.name, who.groups)
        self.answer(
            lambda: asking_view.ask(
                c.service,
                store,
                who,
                self.body(),
                c.now(),
                c.requests_per_week,
                words,
                c.alerts,
            ).to_json(),
            201,
        )


class DecisionHandler(RequestsBase):
    def post(self, request_id: str) -> None:
        who, store, c, words = self.user(), self.store(), self.ctx, self.words()
        admin, rid, now = c.is_admin(who), int(request_id), c.now()
        self.answer(
            lambda: asking_view.decide(store, who, admin, rid, self.body(), now, words).to_json()
        )


class AdminSummaryHandler(ApiBase):
    def get(self) -> None:
        self.admin()
        now, today = self.ctx.now(), self.ctx.today()
        self.write_json(views.admin_summary(self.ctx.service, now, today, self.ctx.alerts_page()))


class AdminCsvHandler(ApiBase):
    def get(self, what: str) -> None:
        self.admin()
        c = self.ctx
        if what != "users" and c.requests is None:
            raise web.HTTPError(404, "requests for more allowance are not kept here")
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        name = f"gpucost-{what}-{c.today().isoformat()}.csv"
        self.set_header("Content-Disposition", f'attachment; filename="{name}"')
        if c.requests is None or what == "users":
            month = billed_view.this_month(c.service.billed, c.today())
            text = views.users_csv(views.admin_summary(c.service, c.now(), c.today()), month)
        else:  # 90 days of requests, and every open one
            text = asking_view.requests_csv(c.requests, c.now() - timedelta(days=90))
        self.finish(text)


class MetricsHandler(ApiBase):
    def get(self) -> None:
        self.admin()
        self.set_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.finish(metrics_view.metrics(self.ctx.service, self.ctx.now(), self.ctx.today()))


class PageBase(OAuthBase):
    def render_page(self, name: str, **values: Any) -> None:
        auth = self.ctx.hub_auth
        hub = auth.hub_prefix
        who = self.user()
        html = render(
            self.ctx.templates,
            name,
            self.words(),
            self.ctx.currency_symbol(),
            hub_prefix=hub,
            service_url=auth.base_url,
            user=who.name,
            is_admin=self.ctx.is_admin(who),
            xsrf_token=self.xsrf_token.decode("ascii"),  # bytes: the forms want text
            **values,
        )
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.finish(html)


class UserPage(PageBase):
    @web.authenticated
    def get(self) -> None:
        self.show()

    def show(self, error: str | None = None) -> None:
        who, c, words = self.user(), self.ctx, self.words()
        data = views.me(c.service, who.name, c.now(), c.today())
        asking = None
        if c.requests is not None and c.service.allowances.enabled:
            c.service.learn_groups(who.name, who.groups)
            symbol = in_language(c.currency_symbol(), words.language)
            admin = c.is_admin(who)
            asking = asking_view.page(c.service, c.requests, who, admin, c.now(), words, symbol)
        chart = views.bars(data["daily"])
        self.render_page("gpucost_user.html", data=data, chart=chart, asking=asking, error=error)


class FormBase(UserPage):
    """The user page's forms: the OAuth cookie and tornado's XSRF token (``_xsrf``,
    checked before ``post``), the API's rules; a refusal shows the page with its sentence."""

    def act(self, act: Callable[[RequestStore, Identity, dict[str, Any]], object]) -> None:
        who = self.user()
        if self.ctx.requests is None:
            raise web.HTTPError(404, "requests for more allowance are not kept here")
        fields = {k: self.get_body_argument(k) for k in self.request.body_arguments}
        try:
            act(self.ctx.requests, who, asking_view.form_body(fields))
        except Refusal as e:
            self.set_status(e.status)
            self.show(str(e))
            return
        self.redirect(self.ctx.hub_auth.base_url, status=303)


class AskForm(FormBase):
    def post(self) -> None:
        c, words = self.ctx, self.words()
        self.act(
            lambda store, who, body: asking_view.ask(
                c.service, store, who, body, c.now(), c.requests_per_week, words, c.alerts
            )
        )


class DecideForm(FormBase):
    def post(self, request_id: str) -> None:
        c, words, rid = self.ctx, self.words(), int(request_id)
        self.act(
            lambda store, who, body: asking_view.decide(
                store, who, c.is_admin(who), rid, body, c.now(), words
            )
        )


class AdminPage(PageBase):
    @web.authenticated
    def get(self) -> None:
        self.admin()
        now, today = self.ctx.now(), self.ctx.today()
        data = views.admin_summary(self.ctx.service, now, today, self.ctx.alerts_page())
        billed = billed_view.page(billed_view.this_month(self.ctx.service.billed, today))
        chart = views.bars(data["daily"])
        self.render_page("gpucost_admin.html", data=data, chart=chart, billed=billed)


def log_request(handler: web.RequestHandler) -> None:
    """The access log: method, path and status, never the query (it may hold a token)."""
    status = handler.get_status()
    level = logging.INFO if status < 400 else logging.WARNING
    if status < 400 and handler.request.method == "POST":
        level = logging.DEBUG  # every server reports every few seconds
    log.log(
        level,
        "%d %s %s %.1f ms",
        status,
        handler.request.method,
        handler.request.path,
        1000 * handler.request.request_time(),
    )


def make_app(ctx: HandlerContext, base_url: str, cookie_secret: bytes) -> web.Application:
    prefix = base_url.rstrip("/")
    report = ReportRoute(ctx)
    routes: list[Any] = [
        (rf"{prefix}/?", UserPage),
        (rf"{prefix}/admin", AdminPage),
        (rf"{prefix}/ask", AskForm),
        (rf"{prefix}/decide/(\d{{1,12}})", DecideForm),
        (rf"{prefix}/oauth_callback", HubOAuthCallbackHandler),
        (report_path(base_url), report),
        (rf"{prefix}/api/me", MeHandler),
        (rf"{prefix}/api/admin/summary", AdminSummaryHandler),
        (rf"{prefix}/api/admin/(users|allowance-requests)\.csv", AdminCsvHandler),
        (rf"{prefix}/api/users/([^/]+)/allowance", AllowanceHandler),
        (rf"{prefix}/api/users/([^/]+)/profiles", ProfileLinesHandler),
        (rf"{prefix}/api/allowance/requests", RequestsHandler),
        (rf"{prefix}/api/allowance/requests/(\d{{1,12}})", DecisionHandler),
        (rf"{prefix}/metrics", MetricsHandler),
    ]
    return web.Application(
        routes,
        gpucost=ctx,
        # the same route, picked by its path before the router (:mod:`.server`)
        gpucost_report=report,
        cookie_secret=cookie_secret,
        xsrf_cookies=True,
        static_path=str(HERE / "static"),
        static_url_prefix=f"{prefix}/static/",
        login_url=ctx.hub_auth.login_url,
        log_function=log_request,
    )


def hub_auth(api_url: str, api_token: str, base_url: str, cache_s: float) -> Any:
    # the one instance: HubOAuthCallbackHandler finds it through HubOAuth.instance()
    return HubOAuth.instance(
        api_url=api_url, api_token=api_token, base_url=base_url, cache_max_age=int(cache_s)
    )
