"""``dedup-store serve``: the store as an HTTP service (the ``server`` extra).

:func:`~dedup_store.server.app.create_app` makes the ASGI application of a store;
:func:`~dedup_store.server.run.serve` runs it with uvicorn. docs/http.md describes the API.
"""
