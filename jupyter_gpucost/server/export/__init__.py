"""Checkpoint export: copy files off an ephemeral box to object storage, with a manifest.

``targets`` (where exports go), ``sources`` (which files may leave, confined to the
server's root dir), ``stores`` (how bytes land: a local folder, S3 through boto3's
multipart API, any other fsspec store), ``jobs`` (background jobs with progress, cancel
and clean-up), ``handlers`` (the REST routes), ``traits`` (``c.GpuCost.export_*``, read
once by the app into ``ExportSettings``).

May import: the server's base (:mod:`..errors`, :mod:`..inputs`, :mod:`..traits`) and
``jupyter_gpucost.core``; its :mod:`.handlers` also the base handler (:mod:`..web`). Never
:mod:`..budget`, :mod:`..spot`, the service or the app.
"""
