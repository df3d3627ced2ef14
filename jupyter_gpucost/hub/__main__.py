"""``python -m jupyter_gpucost.hub``: run the gpucost JupyterHub service;
``python -m jupyter_gpucost.hub check-profiles``: print how each profile is billed;
``python -m jupyter_gpucost.hub export-focus OUT``: write the hub ledger as FOCUS."""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["check-profiles"]:
        from .check_command import main as check_profiles

        sys.exit(check_profiles(sys.argv[2:]))
    if sys.argv[1:2] == ["export-focus"]:
        from .focus_export import main as export_focus

        sys.exit(export_focus(sys.argv[2:]))
    from .app import main

    main()
