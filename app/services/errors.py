"""Domain errors raised by services and turned into HTTP answers by the API layer.

Messages are shown to clients. They must never contain a submitted answer.
"""

from __future__ import annotations

__all__ = ["Conflict", "Forbidden", "Invalid", "NotFound", "ServiceError", "TooLarge", "Unauthorized"]


class ServiceError(Exception):
    status_code = 400

    def __init__(self, detail: str | list | dict) -> None:
        super().__init__(detail if isinstance(detail, str) else "service error")
        self.detail = detail


class Invalid(ServiceError):
    """The request is well-formed but its content is not acceptable (422)."""

    status_code = 422


class NotFound(ServiceError):
    status_code = 404


class Conflict(ServiceError):
    """The request conflicts with the survey's state or earlier answers (409)."""

    status_code = 409


class Unauthorized(ServiceError):
    status_code = 401


class Forbidden(ServiceError):
    status_code = 403


class TooLarge(ServiceError):
    status_code = 413
