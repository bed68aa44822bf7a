"""One build step beyond pyproject.toml: the wheel carries the lessons.

The lessons (``notebooks/``), the files they read (``datasets/``) and the solutions to their
exercises (``solutions/``) live once, at the top of the checkout, where the tests, the README
and Binder expect them. A wheel must carry them too, so that the lessons find their datasets
and ``durablelab lab`` can copy them out after ``pip install durablelab``: this ``build_py``
copies all three into the built package as ``durablelab/lessons/`` (package data that
`durablelab.curriculum` finds with importlib.resources). An editable install needs no copy: it runs from the
checkout, whose folders `durablelab.curriculum` finds directly. Everything else about the
package is in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
LESSON_FOLDERS = ("notebooks", "datasets", "solutions")
SKIPPED_SUFFIXES = {".duckdb", ".wal", ".pyc"}


def lesson_files():
    """Every file of the lesson folders, relative to the checkout, minus caches, checkpoints
    and stores a notebook run may have left behind."""
    for folder in LESSON_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            rel = path.relative_to(ROOT)
            if (path.is_file() and path.suffix not in SKIPPED_SUFFIXES
                    and not any(part.startswith(".") or part == "__pycache__"
                                for part in rel.parts)):
                yield rel


class build_py_with_lessons(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "durablelab" / "lessons"
        for rel in lesson_files():
            self.mkpath(str((target / rel).parent))
            self.copy_file(str(ROOT / rel), str(target / rel), preserve_mode=False)


setup(cmdclass={"build_py": build_py_with_lessons})
