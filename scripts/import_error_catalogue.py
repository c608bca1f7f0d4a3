"""Rebuild npudiag/logs/error_catalogue.toml from CANN's public sources (facts only).

    python scripts/import_error_catalogue.py RUNTIME_CHECKOUT GE_CHECKOUT

RUNTIME_CHECKOUT is a checkout of hicann/runtime, GE_CHECKOUT one of hicann/ge. What is taken: each
error code, the printed message format of the E/W codes (what a log line carries, so an entry can
recognise and show it), the constant name of the numeric ACL / runtime / GE codes, and npudiag's own
category for each (how we group them; the category texts are ours, in log_kb.toml). Nothing else.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

RT_JSON = "src/dfx/error_manager/error_code.json"
GE_REGISTRY = "base/common/error_registry/error_registry.cc"
HEADERS = {
    "include/external/acl/acl_base_rt.h": "AscendCL",
    "include/external/acl/error_codes/rt_error_codes.h": "runtime",
    "include/external/acl/error_codes/ge_error_codes.h": "GE",
}
# errClass -> the component named in titles; codes with no class are named by their 2nd character
CLASS_NAMES = {
    "GE Errors": "GE", "FE Errors": "FE", "AI CPU Errors": "AI CPU", "TE Fusion Errors": "TE fusion",
    "TEFusion Errors": "TE fusion", "Vector Operator Plugin Errors": "vector operator plugin", "Vector Errors": "vector operator",
    "TBE Pass Compiler Errors": "TBE compiler", "RTS Errors": "runtime", "MdatDeploy Errors": "model deployment",
    "ACL Errors": "AscendCL", "HCCL Errors": "HCCL", "HCCP Errors": "HCCP", "Profiling Errors": "profiling",
    "Driver Errors": "driver", "Queue Schedule Errors": "queue scheduler", "AMCT Errors": "AMCT", "DUMP Errors": "dump",
    "Operator Errors": "operator", "Public Operator Errors": "operator", "AclNN Errors": "aclnn",
}  # fmt: skip
UNCLASSED = {"5": "operator", "6": "operator", "7": "operator", "9": "operator compiler", "A": "operator compiler"}

# errTitle of the E/W catalogue -> npudiag category (first match wins)
TITLE_RULES = [
    (r"^W", "warning"),
    (r"Tiling", "op_tiling"),
    (r"Compil|Compile|Emit_Insn|Primitives|Fusion_Pass", "compile"),
    (r"Shape_Mismatch|Input_Tensor_Missing|Input_Attribute_Missing|Invalid_Input|Invalid_Attr", "op_input"),
    (r"Not_Supported|NOT_SUPPORTED|Unsupported|Dynamic_Shape_Not", "unsupported"),
    (r"File_Operation|Directory_Operation", "file"),
    (r"Package_Error|Incorrect_.*Version|Verify_NN|NN_Process_Bin|Load_Package|Send_OPP", "package"),
    (r"Config_Error|Environment_Error|Invalid_Config|Invalid_Numa|Parallel_Option|Memory_Budget|Profiling_Enable", "config"),
    (r"Communication_Error|Ranktable|Inconsistent_Collective|Collective_Communication|IP_Address|Bind_IP|HCCP_Process", "communication"),
    (r"Insufficient|Resource_Error|Memory_Allocation|Full_Service_Queue|Resource_Busy|Cgroup", "resource"),
    (r"Device|TSDaemon|No_Permission|Scheduler_Init|Subprocess|System_Terminated|Driver_API", "device"),
    (r"Execution_Error|Model_Binding|Model_Unbinding|AclNN_Runtime|Timeout", "execution"),
    (r"Invalid|Parameter_Error|API_Call_Sequence|Null_Pointer|Caffe|ONNX|TensorFlow|Graph_Pattern|Slice_Number", "invalid_argument"),
    (r"Inner_Error|AclNN_Inner|Divide_By_Zero|Unexpected_Value|^None$", "internal"),
]

# numeric ACL codes: the constant name says what kind of failure it is
NAME_RULES = [
    (
        r"(AICORE|VECTOR_CORE|AICPU|FFTS_PLUS|CCU).*(EXCEPTION|TIMEOUT|OVERFLOW)|TRAP|HBM|ECC|DEVICE_MEM_ERROR|SYS_DMA|LINK_ERROR"
        r"|L3_PORT",
        "device_task",
    ),
    (
        r"SYNC_TIMEOUT|REPORT_TIMEOUT|MODEL_EXECUTE_TIMEOUT|WAIT_CALLBACK_TIMEOUT|SUSPECT_REMOTE|MODEL_EXECUTE$|MODEL_ABORT"
        r"|LOST_HEARTBEAT|SOCKET_CLOSE|STREAM_CAPTURE|COMM_OP_RETRY",
        "device_wait",
    ),
]


def category_of_title(code: str, title: str | None) -> str:
    t = code[0] + ":" if code[0] == "W" else ""
    key = str(title)
    for pat, cat in TITLE_RULES:
        if re.search(pat, t + key if pat == r"^W" else key):
            return cat
    return "internal"


def category_of_name(code: int, name: str) -> str:
    for pat, cat in NAME_RULES if code // 100000 == 5 else ():
        if re.search(pat, name):
            return cat
    return {1: "acl_param", 2: "acl_resource", 3: "acl_business"}.get(code // 100000, "acl_internal")


def e_codes(runtime: Path, ge: Path) -> list[dict[str, str]]:
    out = []
    rt = json.loads((runtime / RT_JSON).read_text(encoding="utf-8"))["error_info_list"]
    src_rt = "hicann/runtime " + RT_JSON
    blocks = re.findall(r'R"\((.*?)\)"', (ge / GE_REGISTRY).read_text(encoding="utf-8"), re.S)
    ge_list = [e for b in blocks for e in json.loads(b)["error_info_list"]]
    src_ge = "hicann/ge " + GE_REGISTRY
    for items, src in ((rt, src_rt), (ge_list, src_ge)):
        for e in items:
            out.append(
                {
                    "code": e["ErrCode"],
                    "component": CLASS_NAMES.get(str(e.get("errClass")).strip(), UNCLASSED.get(e["ErrCode"][1], "CANN")),
                    "category": category_of_title(e["ErrCode"], e.get("errTitle")),
                    "message": " ".join(str(e.get("ErrMessage", "")).split()),
                    "source": src,
                }
            )
    return out


def numeric_codes(runtime: Path) -> list[dict[str, str]]:
    out = []
    pat = re.compile(r"(?:#define\s+(ACL_ERROR_\w+)\s+(\d{6})U?\b|(ACL_ERROR_\w+)\s*=\s*(\d{6})U?\s*;)")
    for h, component in HEADERS.items():
        for m in pat.finditer((runtime / h).read_text(encoding="utf-8")):
            name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            category = category_of_name(int(value), name)
            out.append({"code": value, "name": name, "component": component, "category": category, "source": "hicann/runtime " + h})
    return out


# torch_npu's error codes: ERR<submodule:02d><code:03d>, printed as "ERR01100 OPS call acl api failed"
# (torch_npu/csrc/core/npu/NPUException.cpp: submoduleMap and errCodeMap; the numbers as seen in real
# logs: ERR00100 PTA / ERR01100 OPS call acl api failed, ERR02200 DIST call hccl api failed,
# ERR02005 DIST internal error)
TORCH_NPU_SOURCE = "Ascend/pytorch torch_npu/csrc/core/npu/NPUException.cpp (submoduleMap, errCodeMap)"
TORCH_NPU_SUBMODULES = ("PTA", "OPS", "DIST", "GRAPH", "PROF")
TORCH_NPU_CODES = {
    1: ("invalid parameter", "invalid_argument"), 2: ("invalid type", "invalid_argument"), 3: ("invalid value", "invalid_argument"),
    4: ("invalid pointer", "invalid_argument"), 5: ("internal error", "internal"), 6: ("memory error", "resource"),
    7: ("feature not supported", "unsupported"), 8: ("resource not found", "resource"), 9: ("resource unavailable", "resource"),
    10: ("system call failed", "config"), 11: ("timeout error", "device_wait"), 12: ("permission error", "device"),
    100: ("call acl api failed", "execution"), 200: ("call hccl api failed", "execution"), 300: ("call ge api failed", "execution"),
}  # fmt: skip


def torch_npu_codes() -> list[dict[str, str]]:
    out = []
    for sub_id, sub in enumerate(TORCH_NPU_SUBMODULES):
        for code, (message, category) in TORCH_NPU_CODES.items():
            out.append({"code": f"ERR{sub_id:02d}{code:03d}", "component": "torch_npu", "category": category,
                        "message": f"{sub} {message}", "source": TORCH_NPU_SOURCE})  # fmt: skip
    return out


def toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def main(argv: list[str]) -> int:
    runtime, ge = Path(argv[1]), Path(argv[2])
    rows = e_codes(runtime, ge) + numeric_codes(runtime) + torch_npu_codes()
    seen: dict[str, dict[str, str]] = {}
    for r in rows:
        seen.setdefault(r["code"], r)
    lines = [
        "# CANN's error-code catalogue as facts: code, printed message format (E/W codes) or constant name",
        "# (numeric ACL / runtime / GE codes), npudiag's category, and the public file it comes from.",
        "# Generated by scripts/import_error_catalogue.py; the category texts (meaning, checks, fix) are",
        "# npudiag's own and live in log_kb.toml. Do not edit by hand: re-run the script.",
        "",
    ]
    for r in sorted(seen.values(), key=lambda r: (r["code"][0].isdigit(), r["code"])):
        lines.append("[[code]]")
        for k in ("code", "name", "component", "category", "message", "source"):
            if r.get(k):
                lines.append(f"{k} = {toml_str(r[k])}")
        lines.append("")
    Path("npudiag/logs/error_catalogue.toml").write_text("\n".join(lines), encoding="utf-8")
    print(f"{len(seen)} codes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
