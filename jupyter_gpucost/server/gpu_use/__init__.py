"""Who used the GPUs: the kernels and their processes, which of NVML's processes is which
kernel's in a container (probes the server observes), and each interval's used GPU time
split among the kernels.

* :mod:`.kernel_procs`: the kernels, their process trees;
* :mod:`.gpu_claims`: the probes a kernel identifies its own GPU process with;
* :mod:`.attribution`: the split of used time and money among kernels;
* :mod:`.payload`: the body of ``GET /gpucost/api/kernels`` (each kernel's GPU use, beside
  the machine's cost while its cells ran);
* :mod:`.handlers`: the probes' routes (the room's HTTP face).

May import: the server's base (:mod:`..errors`, :mod:`..inputs`, :mod:`..kernel_auth`,
:mod:`..traits`, :mod:`..sampler`), ``jupyter_gpucost.core`` and ``.telemetry``; its
:mod:`.handlers` also the base handler (:mod:`..web`). Never :mod:`..record`, the service,
the budget, the exports or the app.
"""
