"""Runs recorded by other engines, read as durablelab `Run`s: a Temporal history
(`dl.load_temporal`, JSON as the Temporal CLI and UI export it) and a DBOS Transact
workflow (`dl.from_dbos`, read from DBOS's own tables). A file from elsewhere is data:
nothing in it is run, and what the other engine does not record is said in `run.notes`."""
