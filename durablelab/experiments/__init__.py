"""Fault-injection experiments: sweep a workflow over retry policies, fault plans and
seeds, and read what survived at what cost.

- `sweep` (`durablelab.experiments.sweep`): runs every (input, policy, fault plan, seed)
  and keeps the results in DuckDB, resumably.
- `Experiment` (`durablelab.experiments.view`): the results as tables, heat maps and load
  plots; `runs()` makes any run again on demand (`durablelab.experiments.remake`).
- `spec`: a sweep's arguments checked, and their data form (JSON with import paths) that
  travels to spawned workers and executors.
- `runner`: how runs are run, isolated or with contention, and their metrics read.
- `io`: an experiment exported to JSON Lines or Parquet and loaded back anywhere.
"""

from .sweep import sweep
from .view import Experiment, compare_experiments, wilson

__all__ = ["sweep", "Experiment", "compare_experiments", "wilson"]
