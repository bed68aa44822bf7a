"""Backends: the same workflow code ``fn(ctx, input)`` on a production engine.

durablelab's own engine is one process and one DuckDB file by design. When a workflow
outgrows it, it graduates to an engine that exists: `durablelab.backends.dbos` runs it on
DBOS Transact over SQLite or PostgreSQL. Each backend is an optional extra, imported only
when asked for.
"""
