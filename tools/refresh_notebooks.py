"""Re-run the lesson notebooks and save only the outputs that nbval checks.

When to run it: after every edit to a notebook (its code, or a change in durablelab that
alters what a checked cell prints), before committing::

    .venv/bin/python tools/refresh_notebooks.py                 # all notebooks/*.ipynb
    .venv/bin/python tools/refresh_notebooks.py notebooks/01_replay.ipynb

Why: the test suite runs the notebooks with ``pytest --nbval-lax``. In that mode nbval
compares a cell's fresh outputs with the outputs stored in the file only for cells marked
``# NBVAL_CHECK_OUTPUT``, and (nbval 0.11) only if the stored cell has outputs and an
``execution_count``; a checked cell saved without them silently compares nothing. So the
stored outputs of checked cells are the expected values of those tests, and this script is
how they are (re)recorded: reviewed in the diff like any other expected value.

What it does, per notebook:

- runs every code cell top to bottom with nbclient in the current Python environment (the
  ``python3`` kernel of ``sys.executable``, like ``--nbval-current-env``), with the
  notebook's folder as the working directory and ``TQDM_DISABLE=1``;
- fails loudly (exit status 1, notebook left untouched) if a cell raises, unless the cell is
  marked ``# NBVAL_RAISES_EXCEPTION``, which also gets Jupyter's ``raises-exception`` tag
  (saved: Run All in JupyterLab goes past the error only with it); cells marked
  ``# NBVAL_SKIP`` are not run, as under nbval;
- keeps outputs and ``execution_count`` only for cells nbval checks; every other code cell
  is saved with ``outputs=[]`` and ``execution_count=None``;
- joins adjacent stream outputs (their split varies from run to run), drops image
  outputs (PNG, SVG, ...) everywhere, and metadata noise: cells keep only their
  ``tags``, the notebook keeps only ``kernelspec`` and ``language_info.name``.

Markers are read with nbval's own parser, so "checked" here means exactly what it means to
nbval (a ``# NBVAL_CHECK_OUTPUT`` comment line, or the ``nbval-check-output`` tag).
tests/test_notebooks.py checks the saved result without starting a kernel.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
from nbval.plugin import find_comment_markers, find_metadata_tags

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

# Tags that tell nbclient what nbval's markers mean: the first is saved with the cell, the
# second added for the run only.
RAISES_TAG = "raises-exception"
SKIP_TAG = "skip-execution"

# Things that make a stored output differ from run to run or machine to machine.
UNSTABLE = [
    (re.compile(r"/tmp/"), "a temporary path"),
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "a memory address"),
]
TEXT_MIMES = {"text/plain"}


def nbval_options(cell) -> dict:
    """The nbval options of a cell: tags first, comment markers win (as in nbval)."""
    options = dict(find_metadata_tags(cell.get("metadata", {})))
    options.update(find_comment_markers(cell.source))
    return options


def is_checked(cell) -> bool:
    """True if `pytest --nbval-lax` compares this cell's outputs."""
    options = nbval_options(cell)
    return (cell.cell_type == "code" and options.get("check", False)
            and not options.get("skip", False))


def kernel_manager():
    """A kernel manager for the python3 kernel of this interpreter (--nbval-current-env)."""
    import ipykernel.kernelspec
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class CurrentEnv(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            return KernelSpec(resource_dir=ipykernel.kernelspec.RESOURCES,
                              **ipykernel.kernelspec.get_kernel_dict())

    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=CurrentEnv())


def execute(nb, folder: Path, timeout: int) -> None:
    """Run all cells in place; raises CellExecutionError on an unexpected error."""
    saved_tags = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        options = nbval_options(cell)
        extra = []
        tags = list(cell.metadata.get("tags", []))
        if options.get("check_exception") and RAISES_TAG not in tags:
            # Kept in the saved file: JupyterLab's Run All and nbconvert stop at an error
            # without it, and never run the rest of the lesson.
            cell.metadata["tags"] = tags + [RAISES_TAG]
        if options.get("skip"):
            extra.append(SKIP_TAG)
        if extra:
            saved_tags[id(cell)] = cell.metadata.get("tags")
            cell.metadata["tags"] = list(cell.metadata.get("tags", [])) + extra
    client = NotebookClient(nb, km=kernel_manager(), timeout=timeout,
                            record_timing=False,
                            resources={"metadata": {"path": str(folder)}})
    try:
        client.execute(cleanup_kc=True)
    finally:
        for cell in nb.cells:
            if id(cell) in saved_tags:
                if saved_tags[id(cell)] is None:
                    del cell.metadata["tags"]
                else:
                    cell.metadata["tags"] = saved_tags[id(cell)]


def clean_output(output):
    """The output without images and metadata, or None if nothing is left."""
    if output.output_type in ("display_data", "execute_result"):
        output.data = {mime: value for mime, value in output.data.items()
                       if not mime.startswith("image/")}
        output.metadata = {}
        if not output.data:
            return None
    return output


def merge_streams(outputs):
    """Join adjacent stream outputs of the same name (stdout, stderr).

    The kernel flushes `print("a")` as one message or as several ("a", "\\n") depending on
    timing, so the raw split differs from run to run. nbval joins streams before comparing,
    so merging changes nothing it checks and keeps the saved file the same on every run.
    """
    merged = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (output.output_type == "stream" and previous is not None
                and previous.output_type == "stream" and previous.name == output.name):
            previous.text += output.text
        else:
            merged.append(output)
    return merged


def clean(nb) -> list[str]:
    """Strip `nb` to what is committed; returns warnings about checked outputs."""
    warnings = []
    kernelspec = nb.metadata.get("kernelspec") or {}
    nb.metadata = nbformat.from_dict({
        "kernelspec": {
            "display_name": kernelspec.get("display_name", "Python 3 (ipykernel)"),
            "language": kernelspec.get("language", "python"),
            "name": kernelspec.get("name", "python3"),
        },
        "language_info": {"name": "python"},
    })
    for index, cell in enumerate(nb.cells):
        tags = cell.metadata.get("tags")
        cell.metadata = nbformat.from_dict({"tags": tags} if tags else {})
        if cell.cell_type != "code":
            continue
        if not is_checked(cell):
            cell.outputs = []
            cell.execution_count = None
            continue
        cell.outputs = merge_streams(
            [out for out in map(clean_output, cell.outputs) if out is not None])
        where = f"cell {index} (# NBVAL_CHECK_OUTPUT)"
        if not cell.outputs:
            warnings.append(f"{where} has no output: nbval will compare nothing")
        for out in cell.outputs:
            if out.output_type == "stream":
                text = out.text
            elif out.output_type in ("display_data", "execute_result"):
                others = set(out.data) - TEXT_MIMES
                if others:
                    warnings.append(f"{where} stores {sorted(others)}, which depends on "
                                    "library versions: print plain text instead")
                text = "".join(str(value) for value in out.data.values())
            else:
                text = "\n".join(out.get("traceback", []))
            for pattern, what in UNSTABLE:
                if pattern.search(text):
                    warnings.append(f"{where} output contains {what}: it will not compare "
                                    "equal on another run")
    return warnings


def refresh(path: Path, timeout: int) -> bool:
    """Refresh one notebook; returns False (and leaves the file alone) on failure."""
    start = time.perf_counter()
    original = path.read_text(encoding="utf-8")
    nb = nbformat.reads(original, as_version=4)
    try:
        execute(nb, path.resolve().parent, timeout)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as error:
        print(f"FAILED {path}: {type(error).__name__}; the notebook was not saved.\n{error}",
              file=sys.stderr)
        return False
    warnings = clean(nb)
    nbformat.validate(nb)
    text = nbformat.writes(nb) + "\n"
    changed = text != original
    if changed:
        path.write_text(text, encoding="utf-8")
    checked = sum(is_checked(cell) for cell in nb.cells)
    print(f"{os.path.relpath(path)}: {'updated' if changed else 'unchanged'}, "
          f"{checked} checked cells, "
          f"{time.perf_counter() - start:.1f} s")
    for warning in warnings:
        print(f"  warning: {warning}", file=sys.stderr)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to refresh (default: notebooks/*.ipynb)")
    parser.add_argument("--timeout", type=int, default=120,
                        help="seconds per cell, as --nbval-cell-timeout (default: 120)")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    if not paths:
        parser.error(f"no notebooks found in {NOTEBOOKS}")
    os.environ["TQDM_DISABLE"] = "1"  # the kernel inherits it: no progress-bar widgets
    ok = [refresh(Path(path), args.timeout) for path in paths]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
