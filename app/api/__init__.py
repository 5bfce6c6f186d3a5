"""HTTP layer: thin FastAPI routers over :mod:`app.services`."""
