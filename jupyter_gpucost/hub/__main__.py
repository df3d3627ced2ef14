"""``python -m jupyter_gpucost.hub``: run the gpucost JupyterHub service;
``python -m jupyter_gpucost.hub check-profiles``: print how each profile is billed."""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["check-profiles"]:
        from .check_command import main as check_profiles

        sys.exit(check_profiles(sys.argv[2:]))
    from .app import main

    main()
