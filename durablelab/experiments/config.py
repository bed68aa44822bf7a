"""Sweep configs: a TOML or JSON file that says what `dl.sweep` should run, for
``durablelab sweep CONFIG --out DIR``.

A config is data: it can choose among code you already have, never supply its own. Running
one may do exactly this, and nothing else:

- import the modules its ``workflow`` and ``world`` name (a module's top level runs when it
  is imported, as ``import`` always does; a module beside the config imports too, unless an
  installed module has its name), never a module of the standard library or a
  ``__main__`` module;
- run the workflow, which must be a durablelab workflow registered by its module
  (``@dl.workflow``, or ``dl.workflow(fn)`` after the def): a name nobody registered, like
  ``pydoc:pipepager``, is refused before anything runs;
- call the world factory with the engine's clock: a class or a ``def`` written in Python
  in your own module (one that registers a durablelab workflow, or one beside the config;
  not a builtin, not C, not the standard library, not another installed package);
- read the fault plan files it names, in the config's own folder or below it;
- write ``DIR/results.duckdb`` and ``DIR/experiment.jsonl``, with at most as many worker
  processes as the machine has CPUs.

Keys (``datasets/experiments/`` has two examples)::

    workflow = "durablelab.examples.storm:triage"     # module:function, registered; required
    world = "durablelab.examples.storm:world"         # a factory world(clock), optional
    inputs = [{id = "t-1", customer = "c-1", refund = 0.0}]    # required, a non-empty list
    seeds = 20                  # n (for range(n)) or a list of ints; default 10
    contention = true           # default false
    processes = 2               # 1 to the CPU count; default: this process
    timeout = 604800            # virtual seconds per run; default 7 days

    [policies]                  # default: {code = "code"} (the code's own policies)
    code = "code"               # the policies the workflow code passes
    temporal = "temporal-default"                      # a preset, by name
    steady = {max_attempts = 6, initial = 1.0, jitter = "none"}   # RetryPolicy fields
    per_activity = {globs = {"model" = {max_attempts = 4}, "*" = "no-retries"}}

    [plans]                     # default: {none = "none"}
    none = "none"               # no faults
    storm = "plans/storm.json"  # a plan file in the config's folder or below it
    flaky = {version = 1, rules = [{type = "ServerError", activity = "model", p = 0.2}]}

Anything else is a `ConfigError` naming the file, the key and what is allowed there.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

from ..errors import ConfigError, PolicyError
from ..faults import FaultPlan
from ..retry import RetryPolicy

KEYS = {"workflow": "'module:function' of a durablelab workflow its module registers "
                    "(@dl.workflow) (required)",
        "world": "'module:function' of a factory world(clock): a class or def written in "
                 "Python in your own module",
        "inputs": "a non-empty list of workflow inputs (required)",
        "policies": "a table of name = policy",
        "plans": "a table of name = fault plan",
        "seeds": "a number n (seeds 0 .. n-1) or a list of ints",
        "contention": "true or false",
        "processes": "a number of worker processes from 1 to the CPU count",
        "timeout": "virtual seconds per run > 0"}


def _cpus() -> int:
    return os.cpu_count() or 1


def _processes_allowed() -> str:
    return f"a whole number of worker processes from 1 to {_cpus()} (this machine's CPUs)"


def _fail(path, key, allowed, problem) -> ConfigError:
    return ConfigError(f"{path}: {key}: {problem}. Allowed: {allowed}.", path=str(path),
                       key=key, allowed=allowed)


def read(path) -> dict:
    """The config at `path` as the keyword arguments of `dl.sweep`. Every other key is
    checked before the workflow's and the world's modules are imported (the module
    docstring says what a config may do); nothing is run. Raises `ConfigError` naming the
    file, the key and what is allowed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the sweep config ({exc.strerror}). Give a "
                          f".toml or .json file.", path=str(path), key=None,
                          allowed=".toml or .json") from None
    if path.suffix.lower() == ".toml":
        import tomllib
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise _fail(path, "(file)", "TOML", f"not valid TOML ({exc})") from None
    elif path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise _fail(path, "(file)", "JSON", f"not valid JSON ({exc})") from None
    else:
        raise _fail(path, "(file)", ".toml or .json", f"unknown kind of file {path.suffix!r}")
    if not isinstance(data, dict):
        raise _fail(path, "(file)", "a table of keys", "the config is not a table")
    allowed = ", ".join(KEYS)
    for key in data:
        if key not in KEYS:
            raise _fail(path, key, allowed, "unknown key")
    for key in ("workflow", "inputs"):
        if key not in data:
            raise _fail(path, key, KEYS[key], "missing")
    out = {}
    inputs = data["inputs"]
    if not isinstance(inputs, list) or not inputs:
        raise _fail(path, "inputs", KEYS["inputs"], f"got {inputs!r}")
    out["inputs"] = inputs
    seeds = data.get("seeds", 10)
    if isinstance(seeds, int) and not isinstance(seeds, bool) and seeds >= 1:
        out["seeds"] = range(seeds)
    elif isinstance(seeds, list) and seeds and all(
            isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        out["seeds"] = seeds
    else:
        raise _fail(path, "seeds", KEYS["seeds"], f"got {seeds!r}")
    if "contention" in data:
        if not isinstance(data["contention"], bool):
            raise _fail(path, "contention", KEYS["contention"], f"got {data['contention']!r}")
        out["contention"] = data["contention"]
    if "processes" in data:
        n = data["processes"]
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= _cpus():
            raise _fail(path, "processes", _processes_allowed(), f"got {n!r}")
        out["processes"] = n
    if "timeout" in data:
        t = data["timeout"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0:
            raise _fail(path, "timeout", KEYS["timeout"], f"got {t!r}")
        out["timeout"] = float(t)
    out["policies"] = {name: _policy(path, f"policies.{name}", value)
                       for name, value in _table(path, data, "policies").items()}
    out["fault_plans"] = {name: _plan(path, f"plans.{name}", value)
                          for name, value in _table(path, data, "plans").items()}
    if not out["policies"]:
        out["policies"] = {"code": None}
    if not out["fault_plans"]:
        out["fault_plans"] = {"none": None}
    # Last: importing runs a module's top level, so only a config valid in all else does.
    out["workflow"] = _import(path, "workflow", data["workflow"])
    if "world" in data:
        out["world"] = _import(path, "world", data["world"])
    return out


def _table(path, data, key) -> dict:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise _fail(path, key, KEYS[key], f"got {value!r}")
    return value


_POLICY_ALLOWED = ("'code', a preset name, a table of RetryPolicy fields (max_attempts, "
                   "initial, backoff, max_interval, jitter, non_retryable, "
                   "model_output_budget), or {globs = {activity glob = policy}}")


def _one_policy(path, key, value):
    from ..presets import presets
    if isinstance(value, str):
        if value in presets:
            return presets[value]
        raise _fail(path, key, _POLICY_ALLOWED + "; presets: " + ", ".join(presets),
                    f"unknown preset {value!r}")
    if isinstance(value, dict):
        try:
            return RetryPolicy.from_dict(value, key)
        except PolicyError as exc:
            raise _fail(path, key, _POLICY_ALLOWED, exc.message.removeprefix(f"{key}: ")
                        .removesuffix(". See help(dl.RetryPolicy).")) from None
    raise _fail(path, key, _POLICY_ALLOWED, f"got {value!r}")


def _policy(path, key, value):
    if value == "code":
        return None
    if isinstance(value, dict) and "globs" in value:
        if set(value) != {"globs"} or not isinstance(value["globs"], dict) or not value["globs"]:
            raise _fail(path, key, _POLICY_ALLOWED, "a globs table stands alone and is not "
                                                    "empty")
        return {glob: _one_policy(path, f"{key}.globs.{glob}", v)
                for glob, v in value["globs"].items()}
    return _one_policy(path, key, value)


_PLAN_ALLOWED = ("'none', a fault plan file in the config's own folder or below it "
                 "(a path relative to the config), or a plan table")


def _plan(path, key, value):
    if value == "none":
        return None
    try:
        if isinstance(value, str):
            return FaultPlan.from_json(_plan_file(path, key, value))
        if isinstance(value, dict):
            return FaultPlan.from_json(json.dumps(value))
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise
        raise _fail(path, key, _PLAN_ALLOWED, str(exc)) from None
    raise _fail(path, key, _PLAN_ALLOWED, f"got {value!r}")


def _plan_file(path, key, value: str) -> Path:
    """The plan file `value` names, which must be in the config's folder or below it (its
    real path, links followed): a config reads no other file."""
    folder = Path(path).resolve().parent
    file = (folder / value).resolve()
    if not file.is_relative_to(folder):
        raise _fail(path, key, _PLAN_ALLOWED,
                    f"{value!r} is outside the config's folder {str(folder)!r}. Fix: copy the "
                    f"plan into that folder, or write it inline as a table")
    if not file.is_file():
        raise _fail(path, key, _PLAN_ALLOWED, f"no fault plan file {str(file)!r}")
    return file


def _import(path, key, target):
    """The registered workflow, or the world factory, that `target` ('module:qualname')
    names. Its module is imported (with the config's folder last on the path, so a module
    beside the config imports, and never shadows an installed one); nothing is called."""
    from ..registry import REGISTRY
    from .spec import _dotted, _locate, module_refused
    if not isinstance(target, str) or target.count(":") != 1:
        raise _fail(path, key, KEYS[key], f"got {target!r}, not 'module:function'")
    module_name, _, name = target.partition(":")
    if not _dotted(module_name) or not _dotted(name) or any(
            part.startswith("__") for part in name.split(".")):
        raise _fail(path, key, KEYS[key], f"{target!r} is not 'module:function' with a "
                                          f"module-level function (no dunder, no lambda)")
    refused = module_refused(module_name)
    if refused:
        raise _fail(path, key, KEYS[key], f"{target!r} {refused}; a config runs only a "
                                          f"workflow or world of your own")
    folder = str(Path(path).resolve().parent)
    added = folder not in sys.path
    if added:   # a config may name a module that sits beside it
        sys.path.append(folder)
    try:
        importlib.import_module(module_name)
    except Exception as exc:   # ImportError, or whatever the module itself raised
        problem = exc if isinstance(exc, ImportError) else f"{type(exc).__name__}: {exc}"
        raise _fail(path, key, KEYS[key], f"cannot import {module_name!r} ({problem})") from None
    finally:
        if added:
            sys.path.remove(folder)
    if key == "workflow":
        fn = REGISTRY.get(target)
        if fn is None:
            raise _fail(path, key, KEYS[key],
                        f"{target!r} is not a registered durablelab workflow (importing "
                        f"{module_name!r} registered none by that name). Fix: in "
                        f"{module_name}, register it with @dl.workflow, or dl.workflow({name}) "
                        f"after its def")
        return fn
    found, problem = _locate(target, "world")
    if problem:
        raise _fail(path, key, KEYS[key], f"{target!r} {problem}. Fix: name a class or a "
                                          f"def world(clock) written in your own module")
    if not _own_module(found.__module__, folder, REGISTRY):
        raise _fail(path, key, KEYS[key], (
            f"{target!r} is in {found.__module__!r}, a module that registers no durablelab "
            f"workflow and is not in the config's folder: a config calls only a world "
            f"written beside your workflows (any installed package's function would "
            f"otherwise be called with the clock, IPython:start_ipython say). Fix: define "
            f"the world in the workflow's module or in a module beside the config"))
    return found


def _own_module(module: str, folder: str, registry) -> bool:
    """Whether `module` is the user's own: it registered a durablelab workflow, or its
    file sits in the config's folder (or below it)."""
    if any(name.partition(":")[0] == module for name in registry):
        return True
    source = getattr(sys.modules.get(module), "__file__", None)
    try:
        return bool(source) and Path(source).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def run(config, out) -> tuple:
    """Run the sweep `config` describes with its results in `out`/results.duckdb (resumable)
    and an export at `out`/experiment.jsonl. Returns (experiment, export path)."""
    from .sweep import sweep
    kwargs = read(config)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    experiment = sweep(**kwargs, path=out / "results.duckdb")
    return experiment, experiment.export(out / "experiment.jsonl")


__all__ = ["read", "run", "KEYS"]
