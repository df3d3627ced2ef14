"""``python -m jupyter_gpucost.hub``: run the gpucost JupyterHub service;
``python -m jupyter_gpucost.hub check-profiles``: print how each profile is billed;
``python -m jupyter_gpucost.hub export-focus OUT``: write the hub ledger as FOCUS;
``python -m jupyter_gpucost.hub reconcile SOURCE``: allocate the cloud's FOCUS bill."""

import sys


def ledger_of(config: str | None) -> tuple[str, str]:
    """The hub ledger's URL and time zone, as the service's config file says."""
    from .focus_export import service_config

    url, tz, _ = service_config(config, currency=False)
    return url, tz.key


if __name__ == "__main__":
    if sys.argv[1:2] == ["check-profiles"]:
        from .check_command import main as check_profiles

        sys.exit(check_profiles(sys.argv[2:]))
    if sys.argv[1:2] == ["export-focus"]:
        from .focus_export import main as export_focus

        sys.exit(export_focus(sys.argv[2:]))
    if sys.argv[1:2] == ["reconcile"]:
        from .reconcile.command import main as reconcile

        sys.exit(reconcile(sys.argv[2:], ledger_of))
    from .app import main

    main()
