"""Readings from and requests to the cloud the server runs on (metadata services, APIs).

Blocking, bounded, never on the event loop: callers run them in a worker thread.
"""
