"""A LangGraph agent under durablelab's fault plans, retries and crash explorer.

LangGraph makes a graph durable with a checkpointer: after each super-step it saves every
channel's value, and ``invoke(None, config)`` resumes a thread from its last checkpoint. Its
unit of durability is the *node* (graph API) or the ``@task`` call (functional API). This
module lets the tools of durablelab reach those units without rewriting the agent:

- `faults(plan, seed=0)`: an injector. ``injector.wrap(fn)`` wraps a node or a ``@task``
  function, ``injector.call(name, fn, *args)`` one call inside a node (a tool call), so a
  `dl.FaultPlan`'s rules apply to them by name, drawn exactly as the engine draws them.
- `retry_on`: for ``RetryPolicy(retry_on=retry_on)``: retry what `dl.classify` calls
  transient or rate-limited. LangGraph's default retries any exception class outside a list
  of built-ins: 5xx of httpx but not its 429, and a 400 raised as your own class.
- `explore_crashes(build, input, invariant)`: crash at every unit the injectors wrap and
  recover as a user would, a freshly built graph calling ``invoke(None, config)`` over the
  same checkpointer; then check the invariant.

What it makes visible: the graph API saves a node's writes only when the node ends, so a
crash after the second tool call of a node runs the whole node again, the first call too;
the functional API saves each ``@task`` result as it ends, so only the unfinished task runs
again; ``durability="exit"`` saves nothing until the graph ends, so a crash loses the run.
"""

from __future__ import annotations

from importlib import metadata

from ...errors import framework_missing, framework_version

SUPPORTED = {"langgraph": ("LangGraph", (1, 0), (2, 0), ">=1.0,<2"),
             "langgraph-checkpoint-sqlite": ("LangGraph's SqliteSaver", (3, 0), (4, 0),
                                             ">=3.0,<4")}


def check_versions(version=metadata.version) -> dict[str, str]:
    """The installed versions of LangGraph and its SQLite checkpointer, checked against
    `SUPPORTED`: this bridge relies on their checkpoint layout and config keys, which are
    not a public API. Raises `dl.errors.FrameworkError` (an ImportError) naming the version
    found, or the package missing."""
    found = {}
    for package, (framework, low, high, text) in SUPPORTED.items():
        try:
            found[package] = installed = version(package)
        except metadata.PackageNotFoundError:
            raise framework_missing("durablelab.backends.langgraph", framework, "langgraph",
                                    f"no package {package}") from None
        numbers = tuple(int(p) for p in installed.split(".")[:2] if p.isdigit())
        if not low <= numbers < high:
            raise framework_version(framework, package, installed, text, "langgraph")
    return found


VERSIONS = check_versions()   # before LangGraph is imported: its internals are relied on

from .explorer import explore_crashes  # noqa: E402
from .injector import Injector, faults, retry_on  # noqa: E402

__all__ = ["faults", "Injector", "retry_on", "explore_crashes", "check_versions",
           "SUPPORTED", "VERSIONS"]
