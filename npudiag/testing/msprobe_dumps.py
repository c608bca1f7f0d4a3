"""msprobe statistics dumps (``dump.json``, ``construct.json``, ``stack.json``) as msprobe writes them
for PyTorch, with planted differences between a run and its golden run, one per verdict rule of
msprobe's statistics compare.

    python -m npudiag.testing.msprobe_dumps OUT     # OUT/mine/step0/rank0, OUT/golden/step0/rank0

The layout and keys follow msprobe's own dumps (``task``, ``level``, ``framework``, ``dump_data_dir``,
``data``; ``input_args`` / ``input_kwargs`` / ``output`` per forward call, tensors with ``type``,
``dtype``, ``shape``, ``Max``, ``Min``, ``Mean``, ``Norm``, ``requires_grad``, arguments with ``type``
and ``value``); Python's JSON writer puts ``NaN`` / ``Infinity`` in the file as msprobe's does.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

# what each call of the pair plants (and the verdict msprobe's statistics compare gives it)
PLANTED = {
    "Torch.matmul.0.forward": "output L2 norm +60 % with equal inputs: error (NormRelativeErr of output > 0.5)",
    "Torch.add.0.forward": "inputs +20 %, output +300 %: warning (output's relative error 15 times the input's)",
    "Torch.softmax.0.forward": "output max inf in mine only: error (nan/inf in mine's max or min)",
    "Torch.mul.0.forward": "output dtype float32 vs float16: error (dtypes differ)",
    "Torch.reshape.0.forward": "output shape [8, 2] vs [4, 4]: error (shapes differ)",
    "Torch.relu.0.forward": "output requires_grad differs: error",
    "Torch.div.0.forward": "scalar argument 2 vs 4: error (scalar arguments differ)",
    "Tensor.to.0.forward": "output NaN in mine, but msprobe ignores this API: pass",
    "Torch.sub.0.forward": "output L2 norm +5 % with equal inputs: pass",
    "Torch.tanh.0.forward": "output L2 norm +20 % with equal inputs: warning (input error 0, output's above 0.1)",
}


def _t(
    mx: float, mn: float, mean: float, norm: float, shape=(4, 4), dtype: str = "torch.float16", grad: bool = False
) -> dict:
    return {
        "type": "torch.Tensor",
        "dtype": dtype,
        "shape": list(shape),
        "Max": mx,
        "Min": mn,
        "Mean": mean,
        "Norm": norm,
        "requires_grad": grad,
    }


def _call(inputs: list, output: dict, kwargs: dict | None = None) -> dict:
    return {"input_args": inputs, "input_kwargs": kwargs or {}, "output": [output]}


def calls(mine: bool) -> dict[str, Any]:
    """The calls of one side, in execution order."""
    x = _t(1.0, -1.0, 0.0, 2.0)
    return {
        "Torch.matmul.0.forward": _call([x, _t(2.0, -2.0, 0.1, 4.0)], _t(3.0, -3.0, 0.2, 9.6 if mine else 6.0)),
        "Torch.add.0.forward": _call(
            [_t(1.2 if mine else 1.0, -1.0, 0.0, 2.4 if mine else 2.0), _t(1.0, 1.0, 1.0, 4.0)],
            _t(2.0, 1.0, 1.25, 20.0 if mine else 5.0),
            {"alpha": {"type": "int", "value": 1}},
        ),
        "Torch.softmax.0.forward": _call(
            [x, {"type": "int", "value": -1}], _t(math.inf if mine else 1.0, 0.0, 0.25, 1.5)
        ),
        "Torch.mul.0.forward": _call(
            [x, x], _t(1.0, 0.0, 0.5, 2.0, dtype="torch.float32" if mine else "torch.float16")
        ),
        "Torch.reshape.0.forward": _call([x], _t(1.0, -1.0, 0.0, 2.0, shape=(8, 2) if mine else (4, 4))),
        "Torch.relu.0.forward": _call([x], _t(1.0, 0.0, 0.25, 1.5, grad=mine)),
        "Torch.div.0.forward": _call([x, {"type": "int", "value": 2 if mine else 4}], _t(0.5, -0.5, 0.0, 1.0)),
        "Tensor.to.0.forward": _call([x], _t(math.nan if mine else 1.0, -1.0, 0.0, 2.0)),
        "Torch.sub.0.forward": _call([x, x], _t(0.1, -0.1, 0.0, 1.05 if mine else 1.0)),
        "Torch.tanh.0.forward": _call([x], _t(0.76, -0.76, 0.0, 1.2 if mine else 1.0)),
    }


def write_dump(folder: Path, data: dict[str, Any]) -> Path:
    """``folder``/dump.json (with construct.json and stack.json beside it), as msprobe writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"task": "statistics", "level": "L1", "framework": "pytorch", "dump_data_dir": None, "data": data}
    (folder / "dump.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    (folder / "construct.json").write_text(json.dumps({k: None for k in data}, indent=1), encoding="utf-8")
    stack = {k: ["File train.py, line 42, in forward, \n y = model(x)"] for k in data}
    (folder / "stack.json").write_text(json.dumps(stack, indent=1), encoding="utf-8")
    return folder / "dump.json"


def write_pair(out: Path) -> tuple[Path, Path]:
    """``out``/mine/step0/rank0 and ``out``/golden/step0/rank0: the two dumps of the pair."""
    return write_dump(out / "mine" / "step0" / "rank0", calls(True)), write_dump(
        out / "golden" / "step0" / "rank0", calls(False)
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    for p in write_pair(ap.parse_args(argv).out):
        print(p)


if __name__ == "__main__":
    main()
