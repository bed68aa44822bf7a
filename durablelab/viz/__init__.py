"""Views: pictures and widgets of runs. Everything here reads `Run` objects only, so it
works the same on a live engine's runs, on runs loaded from an export, and on histories
imported from Temporal. matplotlib and ipywidgets are imported when a view is made, never
by the engine."""


def timeline(runs, **options):
    """A matplotlib Figure of one or more runs side by side on a shared time axis;
    ``children=engine`` (or a list of child Runs) draws each child run's lanes under its
    bar, on the parent's clock."""
    from .plots import timeline as make
    return make(runs, **options)


def compare_plot(frame, **options):
    """A matplotlib Figure comparing the metrics of `dl.compare(runs)`."""
    from .comparison import compare_plot as make
    return make(frame, **options)


def divergence_plot(runs, **options):
    """A matplotlib Figure of where replay stopped in each of `runs` ({label: Run})."""
    from .divergence import divergence_plot as make
    return make(runs, **options)


def trace_plot(spans, run_id=None, **options):
    """A matplotlib Figure of one run's OpenTelemetry spans (`dl.tracing.instrument`):
    run, wake-ups and attempts as bars on the engine's clock."""
    from .trace import trace_plot as make
    return make(spans, run_id, **options)


def run_html(run) -> str:
    """The notebook display of a Run: status, result or error, attempts and wake-ups."""
    from .html import run_html as make
    return make(run)


def __getattr__(name):
    # ReplayExplorer(run): an ipywidgets view that steps through one wake-up's replay.
    # Imported on first use, so `import durablelab` never imports ipywidgets.
    if name == "ReplayExplorer":
        from .explorer import ReplayExplorer
        return ReplayExplorer
    raise AttributeError(f"module 'durablelab.viz' has no attribute {name!r}")


__all__ = ["timeline", "compare_plot", "divergence_plot", "trace_plot", "run_html",
           "ReplayExplorer"]
