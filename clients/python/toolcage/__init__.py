"""toolcage: run AI-agent tool calls in Linux sandboxes (a client for its HTTP API)."""
from .client import (  # noqa: F401
    FINAL_STATUSES, BlockedByPrescreen, Client, Conflict, Event, Forbidden, LimitExceedsPolicy,
    NotFound, Overloaded, ProblemError, QuotaExceeded, Session, ToolcageError, TransportError,
    Unauthorized, Unavailable, UnknownTool, ValidationError,
)
from .client import __all__  # noqa: F401

__version__ = "0.1.0"
