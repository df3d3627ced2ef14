"""The endpoint coding agents call (MCP, docs/agents.md): what the session costs, what a
run would cost, the dearest cells, a lower budget, a stop when the work is done.

* :mod:`.tools`: each tool's answer, from the parts the REST routes read (tornado-free,
  SDK-free);
* :mod:`.schemas`: the tools' names, descriptions and JSON schemas, translated when listed;
* :mod:`.bridge`: one tornado request handed to an ASGI application and its answer back;
* :mod:`.endpoint`: the MCP SDK's server and streamable HTTP transport (the only module
  that imports ``mcp``), run in the server's event loop;
* :mod:`.setup`: the endpoint, or what to install when the ``mcp`` package is missing;
* :mod:`.handlers`: the route ``<base_url>gpucost/mcp``, authenticated as every route.

May import: everything below it (the server's base, :mod:`..service`, :mod:`..budget`,
...), ``jupyter_gpucost.core`` and the ``mcp`` package; its :mod:`.handlers` also the base
handler (:mod:`..web`). Never :mod:`..machine`, :mod:`..spot` or the app.
"""

from __future__ import annotations
