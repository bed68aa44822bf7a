"""A lesson that needs an optional extra: say which one and how to install it, once, and skip
the lesson's cells instead of letting each fail with a traceback.

Most lessons need nothing beyond durablelab. A few put another framework under its fault
plans (Pydantic AI, LangGraph), and those frameworks come with extras
(``pip install "durablelab[pydantic-ai,langgraph]"``; the ``lab`` extra has them all). A
lesson's first code cell calls `require` with the modules it needs. When they all import,
nothing happens. When one does not, the learner reads one message naming the extra, and
every later cell of the notebook prints that it was skipped instead of running: a
traceback per cell would bury the one sentence that matters.
"""

import importlib

#: What a skipped cell prints.
SKIPPED = "skipped: this lesson needs an extra that is not installed (see the first cell)"


def require(*modules: str) -> bool:
    """Import `modules` (such as ``"durablelab.agents.pydantic_ai"``); True when all import.

    When one does not, print why (a durablelab bridge's `FrameworkError` names the extra to
    install) and, in IPython or Jupyter, skip every cell run after this one: each prints
    `SKIPPED` instead. Install the extra, then restart the kernel to run the lesson.
    Outside IPython it only prints and returns False.
    """
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:     # a FrameworkError is an ImportError
            missing.append(f"- {exc}")
    if not missing:
        return True
    print("This lesson needs what is not installed here:\n" + "\n".join(missing) + "\n"
          "Install it (the README's lab command, pip install -e \".[lab]\", installs every "
          "lesson's extras), restart the kernel and run the lesson again. Until then, the "
          "cells below are skipped.")
    shell = _shell()
    if shell is not None and _skip not in shell.input_transformers_post:
        shell.input_transformers_post.append(_skip)
    return False


def _skip(lines: list[str]) -> list[str]:
    """An IPython input transformer: the cell's code replaced by a print of `SKIPPED`."""
    return [f"print({SKIPPED!r})\n"]


def _shell():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


__all__ = ["require", "SKIPPED"]
