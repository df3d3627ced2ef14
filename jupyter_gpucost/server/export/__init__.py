"""Checkpoint export: copy files off an ephemeral box to object storage, with a manifest.

``targets`` (where exports go), ``sources`` (which files may leave, confined to the
server's root dir), ``stores`` (how bytes land: a local folder, S3 through boto3's
multipart API, any other fsspec store), ``jobs`` (background jobs with progress, cancel
and clean-up), ``handlers`` (the REST routes).
"""
