"""What the services return: typed results, one pydantic model per answer.

The same models are the REST API's response bodies (``app.api.schemas`` re-exports
them next to the request bodies), so a service's result and the documented answer
cannot drift apart: a field the service leaves out or misspells fails the type
check (mypy with pydantic's plugin) or the model's validation, not a client. One
module per domain.
"""
