"""The hub's admin page as the service renders it (what ``AdminPage.get`` hands the
template), for tests that read its HTML without a browser."""

from __future__ import annotations

from datetime import UTC, datetime

from jupyter_gpucost.core.i18n import messages_for
from jupyter_gpucost.hub.service import HubService
from jupyter_gpucost.hub.web import billed_view, handlers, views


def admin_page(
    svc: HubService, language: str = "en", now: datetime | None = None, user: str = "admin"
) -> str:
    """The admin page's HTML in ``language``, as of ``now`` (default: the clock)."""
    now = now or datetime.now(UTC)
    data = views.admin_summary(svc, now, now.date())
    return handlers.render(
        handlers.templates("$"),
        "gpucost_admin.html",
        messages_for(language),
        "$",
        hub_prefix="/hub/",
        service_url="/services/gpucost/",
        user=user,
        is_admin=True,
        xsrf_token="x",
        data=data,
        chart=views.bars(data["daily"]),
        billed=billed_view.page(billed_view.this_month(svc.billed, now.date())),
    )
