"""The acl.json ``dump`` section and msprobe's config.json: writing them, and checking them the way
CANN's adump config converter does (keys, values, conflicts), one message per problem."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from npudiag.collect import acl_json
from npudiag.errors import InputError
from npudiag.output import dumps, write_file
from npudiag.safeio import load_json

DUMP_KEYS = {
    "dump_path", "dump_list", "dump_mode", "dump_op_switch", "dump_debug", "dump_level", "dump_stats", "dump_step",
    "dump_data", "dump_scene", "dump_kernel_data",
}  # fmt: skip
VALUES = {
    "dump_mode": {"input", "output", "all"},
    "dump_data": {"tensor", "stats"},
    "dump_op_switch": {"on", "off"},
    "dump_debug": {"on", "off"},
    "dump_level": {"op", "kernel", "all"},
    "dump_scene": {"lite_exception", "aic_err_brief_dump", "aic_err_norm_dump", "aic_err_detail_dump", "watcher"},
    "dump_kernel_data": {"all", "printf", "tensor", "assert", "timestamp"},
}
# exception (AI Core error) dump: --exception LEVEL -> dump_scene; lite_exception is brief's old name
EXCEPTION_SCENES = {"brief": "aic_err_brief_dump", "norm": "aic_err_norm_dump", "detail": "aic_err_detail_dump"}
_EXCEPTION_VALUES = {*EXCEPTION_SCENES.values(), "lite_exception"}
STATS_ITEMS = {"Max", "Min", "Avg", "Nan", "Negative Inf", "Positive Inf", "L2norm"}
LIST_KEYS = {"model_name", "layer", "watcher_nodes", "optype_blacklist", "opname_blacklist", "opname_range"}
MAX_PATH = 512
_STEP_PART = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_steps(spec: str) -> str:
    """``0,5-9`` or ``0|5-9`` -> CANN's ``dump_step`` string ``0|5-9``; ValueError on bad syntax."""
    parts = [p.strip() for p in re.split(r"[|,]", spec) if p.strip()]
    if not parts:
        raise ValueError(f"steps {spec!r}: expected N or N-M parts, e.g. 0,5-9")
    if len(parts) > 100:
        raise ValueError(f"steps {spec!r}: at most 100 parts")
    for p in parts:
        m = _STEP_PART.match(p)
        if not m:
            raise ValueError(f"steps {spec!r}: {p!r} is not N or N-M")
        if m.group(2) is not None and int(m.group(2)) < int(m.group(1)):
            raise ValueError(f"steps {spec!r}: {p!r} ends before it starts")
    return "|".join(parts)


def dump_section(
    path: str,
    layers: list[str] | None = None,
    model: str | None = None,
    mode: str = "output",
    steps: str | None = None,
    data: str = "tensor",
    level: str | None = None,
    overflow: bool = False,
    single_op: bool = False,
    exception: str | None = None,
) -> dict[str, Any]:
    if exception is not None:
        section = _exception_section(path, exception, bool(layers or model or single_op or overflow))
    elif overflow:
        # overflow dump stands alone: CANN rejects it together with model or single-op dump
        if layers or model or single_op:
            raise ValueError("--overflow (dump_debug) cannot be combined with --layers/--model/--single-op")
        section = {"dump_path": path, "dump_debug": "on"}
    else:
        section = _model_section(path, layers, model, mode, data, level, single_op)
    if steps is not None and exception is None:
        section["dump_step"] = parse_steps(steps)
    elif steps is not None:
        raise ValueError("--steps does not go with --exception (the dump is taken when an AI Core error happens)")
    problems = check_section(section, check_path=False)
    if problems:
        raise ValueError(problems[0])
    return section


def _exception_section(path: str, exception: str, with_others: bool) -> dict[str, Any]:
    """The AI Core exception dump: it stands alone (CANN runs it apart from model, single-op and overflow dumps)."""
    if with_others:
        raise ValueError("--exception (dump_scene) cannot be combined with --layers/--model/--single-op/--overflow")
    if exception not in EXCEPTION_SCENES:
        raise ValueError(f"--exception {exception!r}: one of {', '.join(EXCEPTION_SCENES)}")
    return {"dump_path": path, "dump_scene": EXCEPTION_SCENES[exception]}


def _model_section(
    path: str,
    layers: list[str] | None,
    model: str | None,
    mode: str,
    data: str,
    level: str | None,
    single_op: bool,
) -> dict[str, Any]:
    """A model dump (its layers, in one model or every model) or the single-operator dump."""
    if layers and single_op:
        raise ValueError(
            "--layers selects ops of a model dump; --single-op dumps every single-operator call "
            "(drop --single-op to dump these ops, in every model unless --model names one)"
        )
    section: dict[str, Any] = {"dump_path": path, "dump_mode": mode}
    if single_op:
        section["dump_op_switch"] = "on"
        section["dump_list"] = []
    else:
        entry: dict[str, Any] = {"model_name": model} if model else {}
        if layers:
            entry["layer"] = list(layers)
        section["dump_list"] = [entry] if entry else []
        section["dump_op_switch"] = "off"
    if data != "tensor":
        section["dump_data"] = data
    if level is not None:
        section["dump_level"] = level
    return section


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def check_section(d: Any, check_path: bool = True) -> list[str]:
    """Problems with an acl.json ``dump`` section, one line each (empty when CANN would accept it): each check
    of _SECTION_CHECKS in turn, the dump path's writability only when ``check_path``."""
    if not isinstance(d, dict):
        return ["dump: must be a JSON object"]
    return [p for check in _SECTION_CHECKS for p in check(d, check_path)]


def _unknown_keys(d: dict, _: bool) -> list[str]:
    known = ", ".join(sorted(DUMP_KEYS))
    return [f"dump.{k}: unknown key, which CANN ignores (a typo? it reads {known})" for k in d if k not in DUMP_KEYS]


def _bad_values(d: dict, _: bool) -> list[str]:
    return [
        f"dump.{k}: {d[k]!r} is not one of {', '.join(sorted(allowed))}"
        for k, allowed in VALUES.items()
        if k in d and (not isinstance(d[k], str) or d[k] not in allowed)
    ]


def _dump_path(d: dict, check_path: bool) -> list[str]:
    path = d.get("dump_path")
    if path is None:
        return []
    if not isinstance(path, str) or not path:
        return ["dump.dump_path: must be a non-empty string"]
    if len(path) > MAX_PATH:
        return [f"dump.dump_path: {len(path)} characters, at most {MAX_PATH}"]
    return _writable(path) if check_path else []


def _writable(path: str) -> list[str]:
    p = Path(path)
    probe = p if p.exists() else next((a for a in p.absolute().parents if a.exists()), Path("/"))
    if probe.is_dir() and os.access(probe, os.W_OK | os.X_OK):
        return []
    return [f"dump.dump_path: {path} is not writable (checked {probe})"]


def _dump_step(d: dict, _: bool) -> list[str]:
    if "dump_step" not in d:
        return []
    text = str(d["dump_step"])
    try:
        parse_steps(text.replace(",", "|"))
    except ValueError as exc:
        return [f"dump.dump_step: {exc}"]
    return ["dump.dump_step: parts are separated by '|', not ','"] if "," in text else []


def _dump_stats(d: dict, _: bool) -> list[str]:
    if "dump_stats" not in d:
        return []
    st = d["dump_stats"]
    bad_list = not isinstance(st, list) or not st or any(not isinstance(s, str) or s not in STATS_ITEMS for s in st)
    return _when(
        (bad_list, f"dump.dump_stats: must be a non-empty list of {', '.join(sorted(STATS_ITEMS))}"),
        (d.get("dump_data") != "stats", 'dump.dump_stats: needs dump_data "stats" (CANN error EP0005)'),
        ("dump_scene" in d, "dump.dump_stats: cannot be combined with dump_scene (EP0005)"),
    )


def _when(*checks: tuple[Any, str]) -> list[str]:
    """The messages whose condition holds, in order: a table of checks instead of a ladder of ifs."""
    return [message for holds, message in checks if holds]


def _models(d: dict) -> list[dict]:
    """The dump_list entries that name something (a model or layers)."""
    return [e for e in _list(d.get("dump_list")) if isinstance(e, dict) and e]


def _conflicts(d: dict, _: bool) -> list[str]:
    """Keys that CANN refuses together, and what each scene needs."""
    overflow, single_op = d.get("dump_debug") == "on", d.get("dump_op_switch") == "on"
    scene, models = d.get("dump_scene"), _models(d)
    watcher, exception = scene == "watcher", isinstance(scene, str) and scene in _EXCEPTION_VALUES
    return _when(
        (overflow and single_op, "dump.dump_debug: overflow dump cannot be combined with dump_op_switch on"),
        (overflow and models, "dump.dump_debug: overflow dump cannot be combined with a model dump (dump_list)"),
        (
            "dump_scene" in d and (overflow or single_op),
            "dump.dump_scene: cannot be combined with dump_debug or dump_op_switch on",
        ),
        (
            watcher and d.get("dump_mode", "output") != "output",
            'dump.dump_scene: watcher mode needs dump_mode "output"',
        ),
        (watcher and "dump_path" not in d, "dump.dump_path: watcher mode needs dump_path"),
        (
            watcher and any("model_name" in e for e in models),
            "dump.dump_list: watcher mode takes no model_name (layer and watcher_nodes only)",
        ),
        (
            exception and models,
            f"dump.dump_scene: the exception dump ({scene}) cannot be combined with a model dump (dump_list)",
        ),
        (overflow and "dump_path" not in d, "dump.dump_path: the overflow dump (dump_debug on) needs dump_path"),
    )


def _dump_list(d: dict, _: bool) -> list[str]:
    dl = d.get("dump_list")
    if dl is None:
        return []
    if not isinstance(dl, list):
        return ["dump.dump_list: must be a list"]
    return [p for i, e in enumerate(dl) for p in _list_entry(d, f"dump.dump_list[{i}]", e)]


def _list_entry(d: dict, where: str, e: Any) -> list[str]:
    """One dump_list entry: its keys, layer list, model name, blacklists and op range."""
    if not isinstance(e, dict):
        return [f"{where}: must be an object"]
    unknown = [
        f"{where}.{k}: unknown key, which CANN ignores (it reads {', '.join(sorted(LIST_KEYS))})"
        for k in e
        if k not in LIST_KEYS
    ]
    layer, mn = e.get("layer"), e.get("model_name")
    bad_layer = layer is not None and (
        not isinstance(layer, list) or any(not isinstance(x, str) or not x for x in layer)
    )
    # model_name may be omitted: the named layers are then dumped in every model (CANN dump docs)
    return [
        *unknown,
        *_when(
            (bad_layer, f"{where}.layer: must be a list of op names"),
            (
                not bad_layer and layer == [],
                f"{where}.layer: empty (CANN error EP0001); leave it out to dump every op of the model",
            ),
            (
                mn is not None and (not isinstance(mn, str) or not mn),
                f"{where}.model_name: must be a non-empty string (one model per entry)",
            ),
            (
                layer and d.get("dump_op_switch") == "on" and "model_name" not in e,
                f"{where}: a layer list applies to a model dump, not to dump_op_switch on",
            ),
        ),
        *(p for key in ("optype_blacklist", "opname_blacklist") for p in _blacklist(d, f"{where}.{key}", e.get(key))),
        *_op_range(d, f"{where}.opname_range", e),
    ]


def _blacklist(d: dict, where: str, bl: Any) -> list[str]:
    if bl is None:
        return []
    bad = not isinstance(bl, list) or len(bl) > 100 or any(not isinstance(b, dict) or "name" not in b for b in bl)
    return _when(
        (bad, f'{where}: at most 100 {{"name": ..., "pos": [...]}} objects'),
        (d.get("dump_level") != "op", f'{where}: needs dump_level "op" (CANN error EP0005)'),
    )


def _op_range(d: dict, where: str, e: dict) -> list[str]:
    rng = e.get("opname_range")
    if rng is None:
        return []
    if not isinstance(rng, list) or any(not isinstance(r, dict) or {"begin", "end"} - set(r) for r in rng):
        return [f'{where}: a list of {{"begin": op, "end": op}}']
    return _when(
        (d.get("dump_level") != "op", f'{where}: needs dump_level "op" (CANN error EP0005)'),
        (not e.get("model_name"), f"{where}: needs the entry's model_name (CANN error EP0001)"),
        (
            any(not r.get("begin") or not r.get("end") for r in rng),
            f"{where}: begin and end must name ops (CANN error EP0003)",
        ),
    )


def _needs_something(d: dict, _: bool) -> list[str]:
    """A model or single-op dump needs a path; a section must dump something."""
    single_op = d.get("dump_op_switch") == "on"
    nothing = d.get("dump_op_switch", "off") == "off" and not d.get("dump_list") and d.get("dump_debug") != "on"
    return _when(
        (
            (_models(d) or single_op) and "dump_scene" not in d and "dump_path" not in d,
            "dump.dump_path: a model or single-op dump needs dump_path (CANN error EP0001)",
        ),
        (
            nothing and "dump_scene" not in d and "dump_kernel_data" not in d,
            "dump: nothing to dump: give dump_list (a model and its layers), dump_op_switch on, dump_debug on, "
            "dump_scene or dump_kernel_data",
        ),
    )


# the checks of an acl.json dump section, in the order their problems are reported
_SECTION_CHECKS = (
    _unknown_keys,
    _bad_values,
    _dump_path,
    _dump_step,
    _dump_stats,
    _conflicts,
    _dump_list,
    _needs_something,
)


def config_kind(data: Any) -> str:
    """What a dump config holds: acl.json's ``dump`` section, or msprobe's config.json (a ``task``)."""
    return "msprobe config" if isinstance(data, dict) and "dump" not in data and "task" in data else "dump section"


def check_dump_config(path: Path, msprobe: tuple[int, ...] | None = None) -> tuple[str, list[str]]:
    """The kind of dump config at ``path`` (see config_kind) and its problems, one line each (an msprobe
    config.json's task checked against msprobe release ``msprobe``, else the installed one)."""
    try:
        data = load_json(path, unique_keys=True)  # a key given twice: the reader keeps one, the user meant the other
    except InputError as exc:
        return "dump section", [exc.one_line()]
    kind = config_kind(data)
    return kind, _config_problems(path, data, msprobe)


def _config_problems(path: Path, data: Any, msprobe: tuple[int, ...] | None = None) -> list[str]:
    if not isinstance(data, dict):
        return [f"{path}: expected a JSON object"]
    if config_kind(data) == "msprobe config":
        return [f"{path}: {p}" for p in check_msprobe_config(data, msprobe)]
    if "dump" not in data:
        return [f"{path}: no dump section (and not an msprobe config.json: no task)"]
    try:
        problems = check_section(data["dump"])
    except (TypeError, ValueError, AttributeError) as exc:  # a shape the checks did not foresee is still one line
        problems = [f"dump: malformed section ({exc})"]
    return [f"{path}: {p}" for p in problems]


# msprobe's task names by release: TASK_LIST in msprobe/core/common/const.py of the mindstudio-probe wheels
# on PyPI (read at 1.0.1, 1.0.4, 1.1.0, 1.2.0, 1.2.2, 1.3.0, 8.1.0, 8.1.2, 8.2.0, 8.3.0, 8.3.3, 26.0.0, 26.1.0,
# 26.2.0); each row holds from its release until the next row's (releases between two read ones are assumed to
# match the earlier one)
MSPROBE_TASKS_BY_RELEASE = (
    ((1, 0, 1), frozenset({"tensor", "statistics", "overflow_check", "free_benchmark"})),
    ((1, 0, 4), frozenset({"tensor", "statistics", "overflow_check", "free_benchmark", "run_ut", "grad_probe"})),
    ((1, 2, 2), frozenset({"tensor", "statistics", "overflow_check", "free_benchmark", "run_ut", "grad_probe", "structure"})),
    ((8, 2, 0), frozenset({"tensor", "statistics", "overflow_check", "free_benchmark", "run_ut", "grad_probe", "structure",
                           "exception_dump"})),
    ((26, 0, 0), frozenset({"tensor", "statistics", "acc_check", "structure", "overflow_check", "diff_check", "exception_dump"})),
    ((26, 1, 0), frozenset({"tensor", "statistics", "acc_check", "structure", "diff_check", "exception_dump", "nan_check"})),
)  # fmt: skip
MSPROBE_TASKS = MSPROBE_TASKS_BY_RELEASE[-1][1]
# what replaced a task the newest msprobe no longer takes
MSPROBE_RETIRED = {
    "run_ut": "acc_check (the same API pre-check, renamed in 26.0.0)",
    "free_benchmark": "no task since 26.0.0; nan_check finds NaN/Inf, acc_check checks APIs",
    "grad_probe": "msprobe's monitor tool (no dump task since 26.0.0)",
    "overflow_check": "nan_check (since 26.1.0)",
}


def msprobe_release(text: str | None) -> tuple[int, ...] | None:
    """ "26.1.0.post1" -> (26, 1, 0); None for what is not a release number."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(x) for x in m.groups()) if m else None


def installed_msprobe() -> tuple[int, ...] | None:
    """The mindstudio-probe release installed beside npudiag, or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return msprobe_release(version("mindstudio-probe"))
    except PackageNotFoundError:
        return None


def msprobe_tasks(release: tuple[int, ...] | None) -> frozenset[str]:
    """The tasks msprobe ``release`` takes (the newest's when unknown)."""
    rows = [tasks for first, tasks in MSPROBE_TASKS_BY_RELEASE if release is None or first <= release]
    return rows[-1] if rows else MSPROBE_TASKS_BY_RELEASE[0][1]


def _releases_taking(task: str) -> str:
    """The releases whose task list holds ``task``: from its first row to the row after its last."""
    rows = MSPROBE_TASKS_BY_RELEASE
    holding = [i for i, (_, tasks) in enumerate(rows) if task in tasks]
    lo, after = rows[holding[0]][0], holding[-1] + 1
    until = f" up to (not) {'.'.join(map(str, rows[after][0]))}" if after < len(rows) else " and later"
    return f"msprobe {'.'.join(map(str, lo))}{until}"


MSPROBE_LEVELS = {"L0", "L1", "L2", "mix", "debug"}


def check_msprobe_config(d: dict[str, Any], release: tuple[int, ...] | None = None) -> list[str]:
    """Problems with msprobe's config.json (the shape ``dump --format msprobe`` writes), one line each; the
    task is checked against msprobe ``release`` (the installed one, else the newest known)."""
    task = d.get("task")
    level = d.get("level", "L1")
    sub = d.get(task) if isinstance(task, str) else None
    return [
        *_msprobe_task(task, release or installed_msprobe()),
        *_when(
            # msprobe's ExceptionDumpToolFactory: kernel level only
            (
                task == "exception_dump" and level != "L2",
                f"level: exception_dump runs only at level L2 (kernel), not {d.get('level', 'L1 (the default)')!r}; "
                "it is a MindSpore task in msprobe",
            ),
            (
                "level" in d and (not isinstance(level, str) or level not in MSPROBE_LEVELS),
                f"level: {level!r} is not one of {', '.join(sorted(MSPROBE_LEVELS))}",
            ),
            (
                "dump_path" in d and (not isinstance(d["dump_path"], str) or not d["dump_path"]),
                "dump_path: must be a non-empty string",
            ),
            *((key in d and not isinstance(d[key], list), f"{key}: must be a list") for key in ("rank", "step")),
            (sub is not None and not isinstance(sub, dict), f"{task}: must be an object"),
        ),
        *(
            f"{task}.{key}: must be a list"
            for key in ("scope", "list", "data_mode")
            if isinstance(sub, dict) and key in sub and not isinstance(sub[key], list)
        ),
    ]


def _msprobe_task(task: Any, rel: tuple[int, ...] | None) -> list[str]:
    """Whether msprobe ``rel`` takes ``task``; a task of other releases says which, and what replaced it."""
    if not isinstance(task, str) and task is not None:
        return [f'task: {task!r} is not a task name (text, e.g. "statistics")']
    if task in msprobe_tasks(rel):
        return []
    newest = ".".join(map(str, MSPROBE_TASKS_BY_RELEASE[-1][0]))
    named = f"msprobe {'.'.join(map(str, rel))}" if rel else f"current msprobe ({newest}+)"
    if not any(task in tasks for _, tasks in MSPROBE_TASKS_BY_RELEASE):
        return [f"task: {task!r} is not one of {', '.join(sorted(msprobe_tasks(rel)))} ({named})"]
    retired = task in MSPROBE_RETIRED and task not in msprobe_tasks(None)
    instead = f"; use {MSPROBE_RETIRED[task]}" if retired else ""
    return [f"task: {task!r} is not a task of {named} (taken by {_releases_taking(str(task))}){instead}"]


def write_dump_section(path: Path, section: dict[str, Any]) -> dict[str, Any]:
    """Write or merge ``section`` as acl.json's ``dump``; every other section (profiler...) is kept."""
    return acl_json.write_section(path, "dump", section)


def write_msprobe_config(target: Path, cfg: dict[str, Any]) -> None:
    """Write msprobe's config.json (atomically; a file that cannot be written is an OutputError)."""
    write_file(target, dumps(cfg, indent=4) + "\n")


def msprobe_config(
    path: str,
    layers: list[str] | None,
    mode: str,
    steps: str | None,
    data: str,
    level: str | None,
    overflow: bool,
    release: tuple[int, ...] | None = None,
) -> dict[str, Any]:
    """msprobe's config.json for PyTorch: task statistics / tensor, or nan_check for ``overflow``
    (msprobe 26.1's NaN/Inf check; overflow_check for an older msprobe ``release``, the installed one by default).
    msprobe selects a call
    when a ``list`` entry is part of its name, API (``Functional.conv2d.0.forward``) or module
    (``Module.conv1.Conv2d.forward.0``) alike, at the levels that record that kind: layers are dumped
    at level ``mix`` (modules and APIs), so ``conv1`` selects the module and ``conv2d`` the API; at
    level L1 (APIs only) a module name would select nothing."""
    older = (release or installed_msprobe() or (99,)) < (26, 1, 0)  # msprobe before 26.1.0 names it overflow_check
    task = ("overflow_check" if older else "nan_check") if overflow else ("statistics" if data == "stats" else "tensor")
    step: list[Any] = []
    if steps:
        for part in parse_steps(steps).split("|"):
            step.append(part if "-" in part else int(part))
    cfg: dict[str, Any] = {
        "task": task,
        "dump_path": path,
        "rank": [],
        "step": step,
        "level": "L2" if level == "kernel" else ("mix" if layers else "L1"),
    }
    cfg[task] = {"scope": [], "list": list(layers or []), "data_mode": ["all" if mode == "all" else mode]}
    return cfg


def environment_notes(environ: dict[str, str] | None = None) -> list[str]:
    """What in this environment decides over the file's exception dump settings (CANN's order:
    ASCEND_DUMP_SCENE, then NPU_COLLECT_PATH, then the acl.json)."""
    env = os.environ if environ is None else environ
    notes = []
    if env.get("ASCEND_DUMP_SCENE"):
        notes.append(
            f"ASCEND_DUMP_SCENE={env['ASCEND_DUMP_SCENE']!r} is set here: it turns the "
            "exception dump on and decides over "
            "dump_scene in the file (CANN: ASCEND_DUMP_SCENE > NPU_COLLECT_PATH > acl.json)"
        )
    if env.get("NPU_COLLECT_PATH"):
        notes.append(
            f"NPU_COLLECT_PATH={env['NPU_COLLECT_PATH']!r} is set here: exception dumps "
            "land there, whatever dump_path says"
        )
    return notes


def _exception_usage(acl_json: Path, section: dict[str, Any]) -> str:
    scene = section["dump_scene"]
    detail = scene == "aic_err_detail_dump"
    when = " before aclrtSetDevice" if detail else ""
    return (
        f'use it: aclInit("{acl_json}") at start-up, or aclmdlInitDump(); '
        f'aclmdlSetDump("{acl_json}"){when}. When an AI Core error\n'
        "happens, CANN writes the failing op's inputs, outputs and workspace"
        + (
            ", the AI Core's memory, registers and call stack (*.core; Atlas A2/A3 with driver 25.0.RC1 or later)"
            if detail
            else ""
        )
        + "\nunder NPU_COLLECT_PATH, else ASCEND_WORK_PATH, else "
        f"{section.get('dump_path', './')}, then stops the process"
        " (errors while it stops are not part of the fault).\n"
        + (
            "then: read the *.core files with msDebug (other files with msaicerr)"
            if detail
            else "then: read the files with msaicerr"
        )
    )


def usage_text(acl_json: Path, section: dict[str, Any]) -> str:
    if section.get("dump_scene") in _EXCEPTION_VALUES:
        return _exception_usage(acl_json, section)
    base = section.get("dump_path", "./")
    model = next(
        (e.get("model_name") for e in section.get("dump_list", []) if isinstance(e, dict) and e.get("model_name")), None
    )
    where = (
        f"{base}/<YYYYMMDDHHMMSS>/<device_id>/{model or '<model_name>'}/<model_id>/<iteration>/"
        if model
        else f"{base}/<YYYYMMDDHHMMSS>/<device_id>/"
    )
    return (
        f'use it: aclInit("{acl_json}") at start-up, or aclmdlInitDump(); '
        f'aclmdlSetDump("{acl_json}") before loading the model.\n'
        f"dump files will land in {where} (ASCEND_DUMP_PATH or ASCEND_WORK_PATH, when "
        "set, take priority over dump_path)\n"
        f"then: npudiag dump parse {base}"
    )
