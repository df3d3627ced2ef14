"""Write the wire documents' contract (``jupyter_gpucost/core/wire.py``'s types) to
``labextension/src/__tests__/wire-contract.json``, the file the Python tests check real
servers' documents against and the front end's tests check its TypeScript types against.

Run it after changing a type in ``core/wire.py``: ``python scripts/wire_contract.py``
(``--check``: exit 1 if the file is not what the types say).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from jupyter_gpucost.core.wire_schema import contract

PATH = Path(__file__).resolve().parent.parent / "labextension/src/__tests__/wire-contract.json"


def text() -> str:
    return json.dumps(contract(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    if "--check" in argv:
        if PATH.read_text() != text():
            print(f"{PATH} is not what core/wire.py says: run scripts/wire_contract.py")
            return 1
        return 0
    PATH.write_text(text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
