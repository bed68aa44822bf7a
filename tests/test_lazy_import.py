"""`import durablelab` loads the core only; every public name is still there on first use."""

import subprocess
import sys

import durablelab as dl


def _fresh(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_loads_the_core_only():
    loaded = _fresh("import sys, durablelab; print(' '.join(sorted(sys.modules)))").split()
    ours = [m for m in loaded if m.startswith("durablelab")]
    for lab in ("durablelab.agents", "durablelab.exercises", "durablelab.experiments",
                "durablelab.backends", "durablelab.viz", "durablelab.importers", "durablelab.lab",
                "durablelab.examples", "durablelab.versioning"):
        assert not any(m == lab or m.startswith(lab + ".") for m in ours), lab
    assert "pandas" not in loaded and "matplotlib" not in loaded
    # 26: limits; 27: observe (logs); 28: aio (async activities); 29-31: engine.py split into
    # port, concurrency and loading, 32: store.py's schema, 33: context.py's handles (the
    # same code, one concept per module), 34: sticky (runs' code kept between wake-ups). The
    # errors package (its classes, checks and wordings) counts as the one module it was.
    concepts = {m.split(".")[1] if m.startswith("durablelab.errors") else m for m in ours}
    assert len(concepts) <= 34, sorted(concepts)


def test_every_public_name_resolves():
    for name in dl.__all__:
        assert getattr(dl, name) is not None, name
    assert set(dl.__all__) <= set(dir(dl))


def test_a_name_its_module_shares_stays_the_function():
    out = _fresh("import durablelab as dl, durablelab.export, durablelab.diagnose, "
                 "durablelab.compare\n"
                 "print(callable(dl.export), callable(dl.diagnose), callable(dl.compare), "
                 "type(dl.viz).__name__)")
    assert out == "True True True module"


def test_an_unknown_name_is_an_attribute_error():
    try:
        dl.no_such_thing
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("dl.no_such_thing resolved")
