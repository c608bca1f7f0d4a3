"""The DumpData protobuf classes, built at import time from the field table below.

Why not generated code: protoc is not available where npudiag is built or installed, and the
schema is small. Enums in the real .proto (data types, formats, buffer types) are declared here
as int32 fields: proto3 enums are varints on the wire, so the bytes are identical and unknown
future values still parse. ``proto/dump_data.proto`` states the same schema as text.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_TYPES = {
    "int32": _F.TYPE_INT32,
    "uint32": _F.TYPE_UINT32,
    "uint64": _F.TYPE_UINT64,
    "string": _F.TYPE_STRING,
    "bytes": _F.TYPE_BYTES,
}
PACKAGE = "toolkit.dumpdata"

# message -> [(field name, number, type or message name, repeated)]
SCHEMA: dict[str, list[tuple[str, int, str, bool]]] = {
    "Shape": [("dim", 1, "uint64", True)],
    "DimRange": [("dim_start", 1, "uint64", False), ("dim_end", 2, "uint64", False)],
    "OriginalOp": [
        ("name", 1, "string", False), ("output_index", 2, "uint32", False), ("data_type", 3, "int32", False), ("format", 4, "int32", False),
    ],
    "OpOutput": [
        ("data_type", 1, "int32", False), ("format", 2, "int32", False), ("shape", 3, "Shape", False),
        ("original_op", 4, "OriginalOp", False), ("data", 5, "bytes", False), ("size", 6, "uint64", False),
        ("original_shape", 7, "Shape", False), ("sub_format", 8, "int32", False), ("address", 9, "uint64", False),
        ("dim_range", 10, "DimRange", True), ("offset", 11, "uint64", False), ("arg_index", 12, "uint32", False),
    ],
    "OpInput": [
        ("data_type", 1, "int32", False), ("format", 2, "int32", False), ("shape", 3, "Shape", False),
        ("data", 4, "bytes", False), ("size", 5, "uint64", False), ("original_shape", 6, "Shape", False),
        ("sub_format", 7, "int32", False), ("address", 8, "uint64", False), ("offset", 9, "uint64", False),
        ("arg_index", 10, "uint32", False), ("input_type", 11, "uint32", False),
    ],
    "OpBuffer": [("buffer_type", 1, "int32", False), ("data", 2, "bytes", False), ("size", 3, "uint64", False)],
    "OpAttr": [("name", 1, "string", False), ("value", 2, "string", False)],
    "Workspace": [
        ("type", 1, "int32", False), ("data", 2, "bytes", False), ("size", 3, "uint64", False), ("arg_index", 4, "uint32", False),
    ],
    "DumpData": [
        ("version", 1, "string", False), ("dump_time", 2, "uint64", False), ("output", 3, "OpOutput", True),
        ("input", 4, "OpInput", True), ("buffer", 5, "OpBuffer", True), ("op_name", 6, "string", False),
        ("attr", 7, "OpAttr", True), ("space", 8, "Workspace", True), ("dfx_message", 9, "string", False),
    ],
}  # fmt: skip


def _build() -> dict[str, type]:
    fdp = descriptor_pb2.FileDescriptorProto(name="npudiag_dump_data.proto", package=PACKAGE, syntax="proto3")
    for msg, fields in SCHEMA.items():
        m = fdp.message_type.add(name=msg)
        for name, number, kind, repeated in fields:
            f = m.field.add(name=name, number=number, label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if kind in _TYPES:
                f.type = _TYPES[kind]
            else:
                f.type = _F.TYPE_MESSAGE
                f.type_name = f".{PACKAGE}.{kind}"
    pool = descriptor_pool.DescriptorPool()
    fd = pool.Add(fdp)
    del fd
    return {msg: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{msg}")) for msg in SCHEMA}


_CLASSES = _build()
DumpData = _CLASSES["DumpData"]
OpInput = _CLASSES["OpInput"]
OpOutput = _CLASSES["OpOutput"]
