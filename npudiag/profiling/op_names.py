"""Op types from op names, for profiles that record no type.

torch_npu at Level0 writes ``N/A`` as every kernel's Type, and MindSpore's CANN 7 timelines (task_time,
msprof JSON) carry only the full op name; hot operators then fall back to one group per name
("top 20 of 140"). The names hold the type in a few fixed shapes, each written by a known producer:

- MindSpore scope names: ``Default/network-WithLossCell/.../Conv2D-op8``, ``Default/AllReduce-op534_0``
  -> the last scope part without its ``-op<N>`` suffix: ``Conv2D``, ``AllReduce``;
- aclnn kernels (torch_npu): ``aclnnMm_MatMulCommon_MatMulV2`` -> the part after the last ``_``:
  ``MatMulV2`` (the aclnn API, the tiling template, the kernel's op type);
- GE-inserted format changes: ``trans_TransData_12`` -> ``TransData``;
- HCCL collectives: ``hcom_allReduce__328_1`` -> ``hcom_allReduce_``, as the Type column of a Level1
  export names them;
- GE node names, the type and a node index: ``Conv2DBackpropFilter6`` -> ``Conv2DBackpropFilter``
  (only where the name without its digits is a type the profile or CANN's common set knows, since
  ``MatMulV2`` ends in a digit too), ``Conv2DBackpropFilter6_MemSet`` -> ``MemSet`` (a kernel GE
  added to that node).

A name in none of these shapes keeps no type (the op name stands in for it). Work is on the
distinct names, with Arrow's regular expressions, so it is linear in the rows and small in Python.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

# CANN op types common enough to tell a GE node index from a digit of the type (Conv2D4 vs MatMulV2)
COMMON_TYPES = frozenset(
    [
        "Add", "AddN", "Adam", "ApplyMomentum", "ArgMaxV2", "BatchMatMul", "BatchMatMulV2", "BiasAdd", "BiasAddGrad",
        "BNTrainingReduce", "BNTrainingUpdate", "BNTrainingUpdateGrad", "BNTrainingReduceGrad", "Cast", "ConcatD",
        "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropFilterD", "Conv2DBackpropInput", "Conv2DBackpropInputD",
        "DropOutDoMask", "DropOutGenMask", "Equal", "Exp", "FlashAttentionScore", "FlashAttentionScoreGrad", "Fill",
        "GatherV2", "Gelu", "GeluGrad", "LayerNorm", "LayerNormGrad", "Less", "MatMul", "MatMulV2", "MatMulV3", "Maximum",
        "MaxPool", "MaxPoolGrad", "MemSet", "Minimum", "Mul", "Muls", "Neg", "NonZero", "OnesLike", "RealDiv", "ReduceMax",
        "ReduceMean", "ReduceSum", "ReduceSumD", "Relu", "ReluGrad", "Reshape", "RmsNorm", "RmsNormGrad", "Rsqrt",
        "Select", "Sigmoid", "Slice", "SoftmaxV2", "SoftmaxGrad", "SoftmaxCrossEntropyWithLogits", "Sqrt", "Square",
        "SplitD", "StridedSlice", "StridedSliceD", "Sub", "Sum", "Tile", "TransData", "Transpose", "TransposeD",
        "ZerosLike",
    ]
)  # fmt: skip

_SHAPES = (  # (pattern matching the whole name, replacement giving the type)
    (r"^(?:.*/)?([A-Za-z][A-Za-z0-9_]*?)-op[0-9]+(?:_[0-9]+)*$", r"\1"),  # MindSpore scope
    (r"^(?:.*/)([A-Za-z][A-Za-z0-9_]*)$", r"\1"),  # MindSpore scope without an op index
    (r"^aclnn[A-Za-z0-9]+_[A-Za-z0-9]+_([A-Za-z][A-Za-z0-9]*)$", r"\1"),  # aclnn API _ template _ type
    (r"^trans_([A-Za-z][A-Za-z0-9]*)_[0-9]+$", r"\1"),  # GE format change
    (r"^(hcom_[A-Za-z]+_).*$", r"\1"),  # HCCL collective
    (r"^[A-Za-z][A-Za-z0-9]*[0-9]_([A-Za-z][A-Za-z0-9]*)$", r"\1"),  # a kernel GE added to a node
)
_NODE = r"^([A-Za-z][A-Za-z0-9]*?[A-Za-z])[0-9]+$"  # type + node index, the type ending in a letter


def types_from_names(names: pa.Array, known: set[str] | frozenset[str] = frozenset()) -> pa.Array:
    """For each name, the op type it holds by the shapes above, null where it holds none. ``known``
    adds types (e.g. those the profile records elsewhere) to tell a node index from the type's digits."""
    names = names.cast(pa.string())
    out = pa.nulls(len(names), pa.string())
    for pattern, repl in _SHAPES:
        hit = pc.fill_null(pc.match_substring_regex(names, pattern), False)
        got = pc.replace_substring_regex(names, pattern, repl)
        out = pc.if_else(pc.and_(pc.is_null(out), hit), got, out)
    stripped = pc.replace_substring_regex(names, _NODE, r"\1")
    is_node = pc.fill_null(pc.match_substring_regex(names, _NODE), False)
    typed = pc.is_in(stripped, value_set=pa.array(sorted(COMMON_TYPES | set(known)), pa.string()))
    node_type = pc.and_(is_node, pc.fill_null(typed, False))
    return pc.if_else(pc.and_(pc.is_null(out), node_type), stripped, out)


def fill_op_types(kernels: pa.Table) -> tuple[pa.Table, int, list[tuple[str, str]]]:
    """``kernels`` with op_type derived from op_name where it is null; how many rows got one; and up
    to three of this profile's own (name, type) pairs that show how (names that are not their type)."""
    if kernels.num_rows == 0 or kernels["op_type"].null_count == 0:
        return kernels, 0, []
    missing = pc.is_null(kernels["op_type"])
    names = kernels["op_name"]
    distinct = pc.unique(pc.drop_null(pc.filter(names, missing)))
    if len(distinct) == 0:
        return kernels, 0, []
    known = set(pc.unique(pc.drop_null(kernels["op_type"])).to_pylist())
    derived = types_from_names(distinct, known)
    per_row = pc.take(derived, pc.index_in(names, value_set=distinct))
    filled = pc.if_else(missing, per_row, kernels["op_type"])
    got = int(pc.sum(pc.and_(missing, pc.is_valid(per_row))).as_py() or 0)
    i = kernels.schema.get_field_index("op_type")
    return (
        kernels.set_column(i, kernels.schema.field(i), filled.cast(kernels.schema.field(i).type)),
        got,
        _examples(distinct, derived),
    )


def _examples(names: pa.Array, types: pa.Array, n: int = 3) -> list[tuple[str, str]]:
    """Up to ``n`` (name, type) pairs with different types, where the type is not the whole name."""
    differ = pc.and_(pc.is_valid(types), pc.not_equal(names, types))
    pairs = pa.table({"name": names, "type": types}).filter(pc.fill_null(differ, False))
    first = pc.unique(pairs["type"]).slice(0, n)  # one name per type, the first of each
    at = pc.index_in(first, value_set=pairs["type"]).to_pylist()
    return [(pairs["name"][j].as_py(), pairs["type"][j].as_py()) for j in at]
