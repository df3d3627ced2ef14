"""The ``%gpucost`` line commands that answer on their own: what each one does and says,
called by :mod:`..magics` (which reads the line and picks the command).

* :mod:`.budget`: ``%gpucost budget AMOUNT|off``, the user's own budget set on the server;
* :mod:`.check`: ``%gpucost check``, does this kernel's PyTorch match the GPUs and driver;
* :mod:`.fit`: ``%gpucost fit``, will a model of this size fit in GPU memory;
* :mod:`.on_interrupt`: ``%gpucost on-interrupt <code>``, code run at a spot notice.

``%gpucost stop-when-done`` stays at :mod:`jupyter_gpucost.kernel.stop_when_done`, the path
docs/magic.md gives for its ``request_stop``.

May import: :mod:`..cell`, the kernel's link to the server (:mod:`..link`), IPython and
``jupyter_gpucost.core``; never auto mode, the guard, the ticker or the magics.
"""
