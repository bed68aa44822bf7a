"""The simulated world: a model and services with ledgers, outside the worker.

A crash kills the worker, not the world: `engine.crash()` does not reset these objects, so
a side effect that happened before a crash is still there after it, and a service can
count how often the same effect was asked for.

The world also decides how long a call takes: service code answers through `after`, and
`OCCResource` (optimistic concurrency) and `Server` (latency that grows with load) are
built on it, for the published retry experiments (lesson 18).
"""

from ..after import After, after
from .llm import SimLLM, TokenBucket
from .occ import OCCResource, WriteConflict
from .server import Server
from .services import ERP, Bank, Email, Payments, Service, ServiceUnavailable

__all__ = ["Service", "ServiceUnavailable", "Payments", "Email", "ERP", "Bank", "SimLLM",
           "TokenBucket", "after", "After", "OCCResource", "WriteConflict", "Server"]
