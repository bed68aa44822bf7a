"""The lesson notebooks are saved the way tools/refresh_notebooks.py saves them.

No kernel is started: these tests read the .ipynb files. They make sure that the cells
marked `# NBVAL_CHECK_OUTPUT` really are compared by `pytest --nbval-lax` (nbval 0.11
compares nothing for a stored cell without outputs or with a null execution_count), that
what they compare is plain text that does not depend on pandas' HTML or on the machine, and
that no other cell carries stale outputs. If one fails after editing a notebook, run
`.venv/bin/python tools/refresh_notebooks.py` and review the diff.
"""

import json
import re
from pathlib import Path

import pytest
from nbval.plugin import find_comment_markers, find_metadata_tags

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")
FIX = "run tools/refresh_notebooks.py"


def source(cell) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def is_checked(cell) -> bool:
    """True if `pytest --nbval-lax` compares the cell's outputs (nbval's own parser)."""
    options = dict(find_metadata_tags(cell.get("metadata", {})))
    options.update(find_comment_markers(source(cell)))
    return options.get("check", False) and not options.get("skip", False)


def output_text(output) -> str:
    if output["output_type"] == "stream":
        return source({"source": output["text"]})
    if output["output_type"] == "error":
        return "\n".join([output.get("ename", ""), output.get("evalue", ""),
                          *output.get("traceback", [])])
    return "\n".join(source({"source": value}) if not isinstance(value, dict)
                     else json.dumps(value) for value in output.get("data", {}).values())


def code_cells(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(index, cell) for index, cell in enumerate(nb["cells"])
            if cell["cell_type"] == "code"]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/*.ipynb found"


@pytest.fixture(params=NOTEBOOKS, ids=lambda path: path.name)
def notebook(request):
    return request.param


def test_name_is_numbered(notebook):
    assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", notebook.name), (
        f"{notebook.name}: name notebooks NN_name.ipynb (lower case, underscores)")


def test_starts_with_title_and_goal(notebook):
    first = json.loads(notebook.read_text(encoding="utf-8"))["cells"][0]
    text = source(first)
    assert first["cell_type"] == "markdown", "the first cell must be markdown"
    assert text.startswith("# "), "the first cell must start with a '# ' title"
    assert "**Goal.**" in text, "the first cell must state the lesson's **Goal.**"


def test_checked_cells_store_text_outputs(notebook):
    problems = []
    for index, cell in code_cells(notebook):
        if not is_checked(cell):
            continue
        where = f"cell {index} (# NBVAL_CHECK_OUTPUT)"
        if not cell["outputs"]:
            problems.append(f"{where}: no stored output, so nbval compares nothing")
        count = cell["execution_count"]
        if not isinstance(count, int) or isinstance(count, bool):
            problems.append(f"{where}: execution_count is {count!r}, so nbval skips it")
        for output in cell["outputs"]:
            kind = output["output_type"]
            mimes = sorted(output.get("data", {}))
            if kind == "stream" or (kind in ("execute_result", "display_data")
                                    and mimes == ["text/plain"]):
                continue
            problems.append(f"{where}: {kind} output {mimes or ''}; only text is "
                            "stable across library versions (print(frame.to_string()))")
    assert not problems, f"{notebook.name} ({FIX}):\n" + "\n".join(problems)


def test_other_code_cells_store_no_outputs(notebook):
    problems = []
    for index, cell in code_cells(notebook):
        if is_checked(cell):
            continue
        if cell["outputs"]:
            problems.append(f"cell {index}: unchecked cell has stored outputs")
        if cell["execution_count"] is not None:
            problems.append(f"cell {index}: unchecked cell has an execution_count")
    assert not problems, f"{notebook.name} ({FIX}):\n" + "\n".join(problems)


def test_stored_outputs_are_machine_independent(notebook):
    problems = []
    for index, cell in code_cells(notebook):
        for output in cell["outputs"]:
            text = output_text(output)
            if "/tmp/" in text:
                problems.append(f"cell {index}: a stored output contains a temporary path")
            for address in ADDRESS.findall(text):
                problems.append(f"cell {index}: a stored output contains an address {address}")
    assert not problems, f"{notebook.name}:\n" + "\n".join(problems)


def test_every_deliberate_error_is_marked_for_nbval_and_for_jupyter(notebook):
    """A cell that raises on purpose carries `# NBVAL_RAISES_EXCEPTION` (nbval) and the
    `raises-exception` tag (JupyterLab's Run All and `jupyter nbconvert --execute`, which
    otherwise stop there and never run the cells after it); one without the other is a
    lesson that passes its tests and stops half-way in a learner's browser, or the reverse."""
    problems = []
    for index, cell in code_cells(notebook):
        options = dict(find_metadata_tags(cell.get("metadata", {})))
        options.update(find_comment_markers(source(cell)))
        tagged = "raises-exception" in cell.get("metadata", {}).get("tags", [])
        marked = "# NBVAL_RAISES_EXCEPTION" in source(cell)
        if options.get("check_exception") and not tagged:
            problems.append(f"cell {index}: nbval expects an error, but without the "
                            "'raises-exception' tag Run All stops here")
        if tagged and not marked:
            problems.append(f"cell {index}: tagged 'raises-exception' without a "
                            "'# NBVAL_RAISES_EXCEPTION' line, so nbval fails on its error")
    assert not problems, f"{notebook.name} ({FIX}):\n" + "\n".join(problems)
