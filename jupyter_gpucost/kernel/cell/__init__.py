"""Measuring one cell: its times, GPU time, peak memory, energy and cost, the prices it is
priced at, and its record for the notebook file.

* :mod:`.measure`: one cell measured and priced (:class:`~.measure.Measurement`);
* :mod:`.ops`: ``--ops``, the cell's top operators from the profiler's events;
* :mod:`.energy`: the GPUs' energy over a cell, read beside it on a thread of its own;
* :mod:`.cuda`: torch and CUDA as the notebook left them (never imported or started here);
* :mod:`.prices`: the prices a kernel uses (the server's, else the catalog's);
* :mod:`.standalone`: a kernel with no server reads its GPUs and prices itself;
* :mod:`.saved`: a priced cell's record published for the notebook file.

May import: the kernel's link to the server (:mod:`..link`), ``jupyter_gpucost.core``,
``.telemetry`` and ``.cloud``; never :mod:`..training`, :mod:`..commands`, auto mode, the
guard, the ticker or the magics.
"""
