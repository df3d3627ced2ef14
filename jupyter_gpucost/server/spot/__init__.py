"""When the cloud takes a spot machine back: the notice's answer (tell, save, checkpoint,
export, record), the code ``%gpucost on-interrupt`` kept for each kernel, and the
settings and start-up wiring of the watcher and of SIGTERM (docs/spot.md).

* :mod:`.interruption`: the responder, its steps, SIGTERM, the last interruption shown;
* :mod:`.interruption_code`: each kernel's ``on-interrupt`` code run at the notice;
* :mod:`.setup`: the ``GpuCost`` traits of the answer and :func:`~.setup.start_interruption`.

May import: everything below it (the server's base, :mod:`..ledger`, the service,
:mod:`..budget`, :mod:`..export`, :mod:`..machine`), ``jupyter_gpucost.cloud`` and
``.core``; never the handlers or the app (:mod:`..startup`, :mod:`..app`).
"""
