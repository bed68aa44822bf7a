"""Where replay stopped: one row of history per diverged run, position by position.

Each row is a run's recorded history. Positions the new code asked for exactly as history
recorded them were replayed; the position where it asked for something else is where replay
stopped (a `NonDeterminismError`); what lies after was never reached. A guarded run has no
such position: it failed at the call, and is drawn as the steps it had recorded.
"""

from __future__ import annotations

from matplotlib.patches import Patch

from .plots import Figure

COLOURS = {"replayed": "#7cb987", "stopped": "#d9534f", "unreached": "#d6d6d6",
           "guarded": "#f0ad4e"}
WORDS = {"different_call": "another step", "different_arguments": "other arguments",
         "history_not_consumed": "returned early"}


def divergence_plot(runs: dict, *, width: float = 8.0) -> Figure:
    """A Figure with one row per run of `runs` ({label: Run}): its recorded positions,
    coloured replayed / where replay stopped / never reached, the stop annotated with its
    reason. A run that failed with a `DeterminismGuardError` is drawn in the guard's colour
    with the call it stopped."""
    fig = Figure(figsize=(width, 0.9 + 0.42 * len(runs)), layout="constrained")
    ax = fig.add_subplot()
    longest = max([len(run.history) for run in runs.values()] + [1])
    seen = set()
    for row, (label, run) in enumerate(reversed(list(runs.items()))):
        err = run.error
        size = len(run.history)
        stop = getattr(err, "position", None)
        for position in range(1, size + 1):
            if stop is None:
                state = "guarded" if getattr(err, "call", None) else "replayed"
            elif position < stop:
                state = "replayed"
            elif position == stop:
                state = "stopped"
            else:
                state = "unreached"
            seen.add(state)
            ax.barh(row, 0.9, left=position - 0.45, height=0.6, color=COLOURS[state],
                    edgecolor="white")
        if stop is not None:
            note = f"position {stop}: {WORDS.get(err.reason, err.reason)}"
        elif getattr(err, "call", None):
            note = f"guard: {err.call}"
        else:
            note = run.status
        # In axes coordinates, past the last position: the note never covers a box.
        ax.text(1.02, row, note, va="center", fontsize=8, transform=ax.get_yaxis_transform())
    ax.set_yticks(range(len(runs)), list(reversed(list(runs))), fontsize=8)
    ax.set_xticks(range(1, longest + 1))
    ax.set_xlim(0.4, longest + 0.6)
    ax.set_ylim(-0.6, len(runs) - 0.4)
    ax.set_xlabel("history position")
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(handles=[Patch(color=COLOURS[k], label=text) for k, text in (
        ("replayed", "replayed: the code asked for what history recorded"),
        ("stopped", "replay stopped here (NonDeterminismError)"),
        ("unreached", "recorded, never reached"),
        ("guarded", "recorded before the guard stopped the run")) if k in seen],
        loc="upper left", bbox_to_anchor=(0.0, -0.5 / (0.9 + 0.42 * len(runs)) - 0.08),
        ncols=2, fontsize=8, frameon=False)
    ax.set_title("Where replay stopped, by run", fontsize=10, loc="left")
    return fig
