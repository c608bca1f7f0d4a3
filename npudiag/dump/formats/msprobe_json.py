"""msprobe's dump output (PyTorch and MindSpore): ``dump.json`` with a statistics row per tensor.

msprobe (mindstudio-probe) writes, per step and rank, ``{dump_path}/step{N}/rank{R}/dump.json``
(``proc{PID}`` instead of ``rank{R}`` on one device) beside ``construct.json`` (which module called
which API) and ``stack.json`` (call stacks). ``dump.json`` is one object: ``task``, ``level``,
``framework``, ``dump_data_dir`` and ``data``, which maps each API or module call, in execution
order, to its tensors: ``input_args`` (a list), ``input_kwargs`` (an object), ``output``,
``parameters`` (modules) for forward calls, ``input`` / ``output`` for backward ones, and the
parameter gradients under a ``...parameters_grad`` name. A tensor is an object with a ``type``
(``torch.Tensor``, ``mindspore.Tensor``), ``dtype``, ``shape`` and its statistics ``Max``, ``Min``,
``Mean``, ``Norm`` (L2 norm); lists and objects nest (tuples of tensors); other values (``int``,
``float``, ``bool``, ``str``, null) are arguments, not tensors.

A tensor's name is msprobe's: the call, then ``.input`` (args and kwargs alike), ``.output`` or
``.parameters``, then each list index or object key down to the tensor
(``Functional.conv2d.0.forward.input.1``, ``Module.fc.Linear.parameters_grad.0.weight``), so two
dumps match tensor by tensor as msprobe's own compare matches them. Python's JSON writer puts
``NaN`` / ``Infinity`` into the file for a tensor that holds them; they are read as such. In tensor
mode each tensor also names the file msprobe saved it to (``data_name``, a ``.pt`` for PyTorch or
``.npy`` for MindSpore in ``dump_tensor_data/``): that file is the row's ``file``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from npudiag.errors import InputError
from npudiag.safeio import MAX_DEPTH, json_int, read_text_limited, text_of

FILE_NAME = "dump.json"
TENSOR_FOLDER = "dump_tensor_data"  # beside dump.json in tensor mode
MAX_BYTES = 4 << 30  # a statistics dump of one step: megabytes for a large model; a bound, not a guess
_IO = {"input_args": "input", "input_kwargs": "input", "input": "input", "output": "output", "parameters": "parameters"}
_PARAMS_GRAD = "parameters_grad"
_STEP = re.compile(r"^step([0-9]{1,9})$")
_CALL = re.compile(r"^(?P<type>.+?)\.(?P<n>[0-9]+)\.(?P<dir>forward|backward)$")  # Functional.conv2d.0.forward
_MODULE_CALL = re.compile(r"^(?P<type>.+?)\.(?P<dir>forward|backward)\.(?P<n>[0-9]+)$")  # Module.conv1.Conv2d.forward.0


def is_msprobe_dump(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("data"), dict) and ("task" in doc or "framework" in doc)


def call_type(name: str) -> str:
    """The API or module of a call, without its count and direction: ``Functional.conv2d.0.forward`` ->
    ``Functional.conv2d``, ``Module.conv1.Conv2d.forward.0`` -> ``Module.conv1.Conv2d``."""
    m = _CALL.match(name) or _MODULE_CALL.match(name)
    if m:
        return m.group("type")
    parts = name.split(".")
    if _PARAMS_GRAD in parts:
        return ".".join(parts[: parts.index(_PARAMS_GRAD)])
    return name


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None  # msprobe writes null (or a note) where a statistic could not be taken
    return float(v)


def _is_tensor(v: dict) -> bool:
    t = v.get("type")
    return isinstance(t, str) and t.endswith("Tensor") and ("shape" in v or "dtype" in v)


def _is_scalar(v: dict) -> bool:
    """An argument's value msprobe records as is (``{"type": "int", "value": -1}``)."""
    return "value" in v and (v["value"] is None or isinstance(v["value"], (bool, int, float, str)))


def _leaves(
    data: Any, name: str, depth: int, out: list[tuple[str, dict]], index_lists: bool = True, scalars: bool = False
) -> None:
    """(msprobe name, tensor object) of every tensor under ``data`` (and every scalar argument with
    ``scalars``), in msprobe's order."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{name}: nested deeper than {MAX_DEPTH} levels; no real dump is")
    if isinstance(data, list):
        for i, v in enumerate(data):
            _leaves(v, f"{name}.{i}" if index_lists else name, depth + 1, out, index_lists, scalars)
    elif isinstance(data, dict):
        if isinstance(data.get("type"), str):  # a leaf: a tensor or an argument's value
            if _is_tensor(data) or (scalars and _is_scalar(data)):
                out.append((name, data))
            return
        for k, v in data.items():
            _leaves(v, f"{name}.{k}", depth + 1, out, index_lists, scalars)


def _shape(v: Any) -> list[int] | None:
    if not isinstance(v, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 62 for d in v
    ):
        return None
    return v


def _elements(shape: list[int] | None) -> int | None:
    if shape is None:
        return None
    n = 1
    for d in shape:
        n *= d
        if n >= 1 << 62:
            return None
    return n


def read_msprobe_dump(path: Path, scalars: bool = False) -> list[dict[str, Any]]:
    """One row (in the tensors schema, plus ``requires_grad``) per tensor of ``path``, in execution
    order; with ``scalars`` also one per scalar argument (``scalar`` True, its ``value``, the number in
    max / min / mean / l2norm as msprobe puts it there). InputError for a file that is not msprobe's dump.json."""
    text = read_text_limited(path, MAX_BYTES)
    try:
        doc = json.loads(text, parse_int=json_int)  # NaN and Infinity, as Python's writer puts them, are read
    except RecursionError:
        raise InputError(path, f"JSON nested deeper than {MAX_DEPTH} levels; no real dump is") from None
    except ValueError as exc:
        raise InputError(path, f"not valid JSON ({exc})") from None
    del text
    if not is_msprobe_dump(doc):
        raise InputError(path, "a dump.json without msprobe's data object (task, level, framework, data)")
    step = next((int(m.group(1)) for p in path.parents[:3] if (m := _STEP.match(p.name))), None)
    rows: list[dict[str, Any]] = []
    for call, entry in doc["data"].items():
        if not isinstance(entry, dict):
            continue  # a call msprobe recorded nothing for
        parts = call.split(".")
        found: list[tuple[str, str, dict]] = []
        try:
            if parts[-1] == _PARAMS_GRAD or (len(parts) >= 2 and parts[-2] == _PARAMS_GRAD):
                leaves: list[tuple[str, dict]] = []
                _leaves(entry, call, 0, leaves, index_lists=False, scalars=scalars)
                found += [(n, _PARAMS_GRAD, t) for n, t in leaves]
            else:
                for key, io in _IO.items():
                    if key in entry:
                        leaves = []
                        _leaves(entry[key], f"{call}.{io}", 0, leaves, scalars=scalars)
                        found += [(n, io, t) for n, t in leaves]
        except ValueError as exc:
            raise InputError(path, str(exc)) from None
        index: dict[str, int] = {}
        for tensor_name, io, t in found:
            base = {
                "file": text_of(path),
                "source": "msprobe",
                "op_type": call_type(call),
                "op_name": call,
                "iteration": step,
                "io": io,
                "tensor_name": tensor_name,
            }
            if not _is_tensor(t):  # a scalar argument (only with scalars)
                v = _number(t["value"])
                rows.append(
                    {
                        **base,
                        "index": None,
                        "scalar": True,
                        "value": t["value"],
                        "dtype": t["type"],
                        "shape": [],
                        "max": v,
                        "min": v,
                        "mean": v,
                        "l2norm": v,
                        "requires_grad": None,
                    }
                )
                continue
            index[io] = index.get(io, -1) + 1
            shape = _shape(t.get("shape"))
            stats = {
                k: _number(t.get(src))
                for k, src in (("max", "Max"), ("min", "Min"), ("mean", "Mean"), ("l2norm", "Norm"))
            }
            grad = t.get("requires_grad")
            saved = t.get("data_name")  # tensor mode: the .pt / .npy file msprobe saved it to, in dump_tensor_data/
            if isinstance(saved, str) and saved and "/" not in saved and "\\" not in saved and saved not in (".", ".."):
                base["file"] = text_of(path.parent / TENSOR_FOLDER / saved)
            rows.append(
                {
                    **base,
                    "index": index[io],
                    "dtype": t["dtype"] if isinstance(t.get("dtype"), str) else None,
                    "shape": shape,
                    "element_count": _elements(shape),
                    "requires_grad": grad if isinstance(grad, bool) else None,
                    **stats,
                }
            )
    return rows
