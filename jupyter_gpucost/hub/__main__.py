"""``python -m jupyter_gpucost.hub``: run the gpucost JupyterHub service."""

from .app import main

if __name__ == "__main__":
    main()
