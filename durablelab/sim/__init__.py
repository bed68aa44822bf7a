"""The simulated world: a model and services with ledgers, outside the worker.

A crash kills the worker, not the world: `engine.crash()` does not reset these objects, so
a side effect that happened before a crash is still there after it, and a service can
count how often the same effect was asked for.
"""

from .llm import SimLLM, TokenBucket
from .services import ERP, Bank, Email, Payments, Service, ServiceUnavailable

__all__ = ["Service", "ServiceUnavailable", "Payments", "Email", "ERP", "Bank", "SimLLM",
           "TokenBucket"]
