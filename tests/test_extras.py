"""A lesson that needs a missing extra says which one once, and skips its later cells
instead of failing each with a traceback (durablelab.extras.require)."""

import pytest

from durablelab.extras import SKIPPED, require


def test_everything_installed_changes_nothing(capsys):
    assert require("json", "durablelab.sim") is True
    assert capsys.readouterr().out == ""


def test_outside_ipython_a_missing_module_is_said_and_nothing_else(capsys):
    assert require("json", "durablelab_no_such_extra") is False
    said = capsys.readouterr().out
    assert "No module named 'durablelab_no_such_extra'" in said
    assert 'pip install -e ".[lab]"' in said and "restart the kernel" in said


def test_in_ipython_the_cells_after_it_print_that_they_were_skipped(capsys):
    interactive = pytest.importorskip("IPython.core.interactiveshell")
    shell = interactive.InteractiveShell.instance()
    try:
        first = shell.run_cell("from durablelab.extras import require\n"
                               "ready = require('durablelab_no_such_extra')")
        assert first.success and shell.user_ns["ready"] is False
        later = shell.run_cell("1 / 0")      # would raise: it is not run at all
        assert later.success and later.error_in_exec is None
        again = shell.run_cell("from durablelab.extras import require\n"
                               "require('durablelab_no_such_extra')")
        assert again.success
        out = capsys.readouterr().out
        assert out.count(SKIPPED) == 2 and "ZeroDivisionError" not in out
    finally:
        shell.input_transformers_post.clear()
        interactive.InteractiveShell.clear_instance()


def test_a_bridge_says_which_extra_to_install(capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)     # as if not installed
    monkeypatch.delitem(sys.modules, "durablelab.agents.pydantic_ai", raising=False)
    assert require("durablelab.agents.pydantic_ai") is False
    assert "pip install 'durablelab[pydantic-ai]'" in capsys.readouterr().out
