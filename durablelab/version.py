"""The package's version, kept in one place.

`durablelab.__version__` re-exports it, and modules that record it (an export's header
says which durablelab wrote the file) import it from here, so no module reaches back up
through the package face (`durablelab/__init__.py`), which imports everything.
Keep it equal to `version` in pyproject.toml.
"""

__version__ = "0.1.0"
