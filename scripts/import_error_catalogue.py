"""Rebuild npudiag/logs/error_catalogue.toml from CANN's and torch_npu's public sources.

    python scripts/import_error_catalogue.py RUNTIME GE [TORCH_NPU]

RUNTIME, GE and TORCH_NPU are checkouts (or bare mirrors: files are read at HEAD) of hicann/runtime,
hicann/ge and Ascend/pytorch; each row records the commit it was read at. Taken per code: the printed
message format (E/W codes) or the constant name (numeric codes), the CANN release of that text and the
first public release holding the code, npudiag's category (how we group codes), and, where the source
has them, a pin (advice_sha) and the facts (terms) of the code's own cause and solution: error_code.json /
error_registry.cc "suggestion" for E/W codes, the aclError reference page (docs/zh/api_ref/
25-01_aclError.md, the "可能原因及解决方法" column) for numeric codes. The source's sentences are not
copied: npudiag/logs/code_advice.toml words each in our language, and this script exits 1 listing the
codes whose source text has no wording yet (a new code, or a source that changed since it was worded).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

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


# the printed message where the title's class says less than it (EJ0002 "The network port is down" is titled
# Environment_Error; its remedy is the link checks of the communication category)
MESSAGE_RULES = [(r"network port is down", "communication")]


def category_of_title(code: str, title: str | None, message: str = "") -> str:
    for pat, cat in MESSAGE_RULES:
        if re.search(pat, message):
            return cat
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


def _norm(s: object) -> str:
    """A source text as compared and hashed: whitespace collapsed, "N/A" (the sources' "nothing") empty."""
    t = " ".join(str(s or "").replace("<br>", " ").split())
    return "" if t.rstrip(".").upper() in ("N/A", "NA", "-", "") else t


def advice_sha(cause: str, solution: str) -> str:
    """Pins the source text an advice entry of code_advice.toml was written from."""
    return hashlib.sha256(f"{cause}\n{solution}".encode()).hexdigest()[:12]


# the facts a faithful rewording must keep: API / variable / option / file names, sizes and times, links,
# and the source's key nouns (either language); tests/test_log_kb.py checks each in npudiag's text
_TERM_RES = (
    r"(?<![A-Za-z0-9_])[A-Za-z]+(?:_[A-Za-z0-9]+)+(?![A-Za-z0-9_])",  # HCCL_EXEC_TIMEOUT, graph_def_library
    r"(?<![A-Za-z0-9_])[a-z]+[A-Z][A-Za-z0-9]*(?![A-Za-z0-9_])",  # aclrtSetOpExecuteTimeOut, inputDesc
    r"(?<![\w-])--[a-z][a-z_]*",  # --input_shape
    r"(?<![A-Za-z0-9_])[A-Za-z0-9_]+\.(?:json|pbtxt|py|sh)(?![A-Za-z0-9_])",  # graph_parallel_option.json
    r"(?<![\d.])\d+ ?(?:MB|GB|s)(?![A-Za-z])",  # 20MB, 120s
)
_URL = re.compile(r"https?://(?:www\.)?([A-Za-z0-9.\-]+/[A-Za-z0-9_\-]+)")
GLOSSARY = {
    "queue": "queue", "队列": "queue", "permission": "permission", "权限": "permission", "reinstall": "reinstall",
    "重新安装": "reinstall", "technical support": "support", "技术支持": "support", "ECC": "ECC", "timeout": "timeout",
    "超时时间": "timeout", "disk": "disk", "存储": "storage", "内存": "memory", "memory": "memory", "重新构建": "rebuild",
    "rebuild": "rebuild", "driver": "driver", "驱动": "driver", "日志": "log", "ldd": "ldd", "Protobuf": "Protobuf",
    "Caffe": "Caffe", "ONNX": "ONNX", "AIPP": "AIPP", "OPP": "OPP", "ranktable": "ranktable", "plog": "plog",
    "shape": "shape", "format": "format", "dtype": "dtype", "数据类型": "data type", "stream": "stream", "event": "event",
    "device": "device", "file": "file", "文件": "file", "path": "path", "路径": "path", "model": "model", "模型": "model",
    "operator": "operator", "算子": "operator", "attribute": "attribute", "属性": "attribute", "input": "input",
    "输入": "input", "output": "output", "输出": "output", "context": "context", "thread": "thread", "线程": "thread",
    "network": "network", "profil": "profil", "dump": "dump", "environment variable": "environment variable",
    "环境变量": "environment variable", "version": "version", "版本": "version", "重复": "repeat", "repeated": "repeat",
    "order": "order", "顺序": "order", "对齐": "align", "aligned": "align",
}  # fmt: skip


def terms(text: str) -> list[str]:
    """The facts of a source's cause / solution that npudiag's own wording must carry, in order."""
    found: dict[str, None] = {}
    for pat in _TERM_RES:
        for m in re.finditer(pat, text):
            found[m.group(0).replace(" ", "")] = None
    for m in _URL.finditer(text):
        found[m.group(1)] = None
    low = text.lower()
    for word, term in GLOSSARY.items():
        if word.lower() in low:
            found[term] = None
    return list(found)


CATALOGUE = "npudiag/logs/error_catalogue.toml"
ADVICE = "npudiag/logs/code_advice.toml"


class Checkout:
    """A checkout (or a bare mirror) of a source repository: files at HEAD, its commit, release tags."""

    def __init__(self, path: Path, name: str) -> None:
        self.path, self.name = path, name

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.path), *args], check=True, capture_output=True, text=True).stdout

    def read(self, rel: str) -> str:
        f = self.path / rel
        return f.read_text(encoding="utf-8") if f.is_file() else self._git("show", f"HEAD:{rel}")

    def commit(self) -> str:
        return self._git("rev-parse", "HEAD").strip()

    def cann_version(self) -> str:
        m = re.search(r'VERSION\s+"([^"]+)"', self.read("version.cmake"))
        return m.group(1) if m else "unknown"

    def releases(self) -> list[str]:
        """Release tags (vX.Y.Z, no pre-release suffix), oldest first."""
        tags = [t for t in self._git("tag").split() if re.fullmatch(r"v\d+\.\d+\.\d+", t)]
        return sorted(tags, key=lambda t: tuple(int(x) for x in t[1:].split(".")))

    def tags_by_date(self) -> list[str]:
        return [t for t in self._git("tag", "--sort=creatordate").split() if "alpha" not in t]

    def show(self, rev: str, rel: str) -> str:
        r = subprocess.run(["git", "-C", str(self.path), "show", f"{rev}:{rel}"], capture_output=True, text=True)
        return r.stdout

    def grep(self, tag: str, pattern: str) -> set[str]:
        r = subprocess.run(["git", "-C", str(self.path), "grep", "-h", "-o", "-E", pattern, tag], capture_output=True, text=True)
        return set(r.stdout.split("\n"))


def first_release(checkouts: list[Checkout], pattern: str, key: re.Pattern[str]) -> dict[str, str]:
    """code -> the first public release tag whose tree holds it (any of the checkouts)."""
    seen: dict[str, tuple[int, ...]] = {}
    for c in checkouts:
        for tag in c.releases():
            for hit in c.grep(tag, pattern):
                m = key.search(hit)
                v = tuple(int(x) for x in tag[1:].split("."))
                if m and v < seen.get(m.group(1), (99,)):
                    seen[m.group(1)] = v
    return {code: ".".join(map(str, v)) for code, v in seen.items()}


def e_codes(runtime: Checkout, ge: Checkout) -> list[dict[str, str]]:
    out = []
    rt = json.loads(runtime.read(RT_JSON))["error_info_list"]
    blocks = re.findall(r'R"\((.*?)\)"', ge.read(GE_REGISTRY), re.S)
    ge_list = [e for b in blocks for e in json.loads(b)["error_info_list"]]
    since = first_release([runtime, ge], r'"ErrCode" *: *"[A-Z0-9]{6}"', re.compile(r'"([A-Z0-9]{6})"'))
    for items, c, path in ((rt, runtime, RT_JSON), (ge_list, ge, GE_REGISTRY)):
        version, commit = c.cann_version(), c.commit()
        for e in items:
            s = e.get("suggestion") or {}
            cause, solution = _norm(s.get("Possible Cause")), _norm(s.get("Solution"))
            row = {
                "code": e["ErrCode"],
                "component": CLASS_NAMES.get(str(e.get("errClass")).strip(), UNCLASSED.get(e["ErrCode"][1], "CANN")),
                "category": category_of_title(e["ErrCode"], e.get("errTitle"), str(e.get("ErrMessage", ""))),
                "message": " ".join(str(e.get("ErrMessage", "")).split()),
                "source": f"{c.name}@{commit[:12]} {path}#{e['ErrCode']}",
                "cann": version,
                "since": since.get(e["ErrCode"], ""),
            }
            if cause or solution:
                row["advice_sha"] = advice_sha(cause, solution)
                row["terms"] = terms(f"{cause} {solution}")
            out.append(row)
    return out


ACL_ERROR_DOC = "docs/zh/api_ref/25-01_aclError.md"
_DOC_ROW = re.compile(r"(ACL_\w+)\s*=?\s*(\d{6})")


def doc_rows(runtime: Checkout) -> dict[str, tuple[str, str]]:
    """code -> (meaning, cause and solution) from the aclError reference page's tables (Chinese)."""
    out = {}
    for line in runtime.read(ACL_ERROR_DOC).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")] if line.startswith("|") else []
        m = _DOC_ROW.search(cells[0]) if len(cells) >= 3 else None
        if m and m.group(2) != "000000":
            out[m.group(2)] = (_norm(cells[1]), _norm(cells[-1]))
    return out


def numeric_codes(runtime: Checkout) -> list[dict[str, str]]:
    out = []
    pat = re.compile(r"(?:#define\s+(ACL_ERROR_\w+)\s+(\d{6})U?\b|(ACL_ERROR_\w+)\s*=\s*(\d{6})U?\s*;)")
    docs, commit, version = doc_rows(runtime), runtime.commit(), runtime.cann_version()
    since = first_release([runtime], r"ACL_ERROR_\w+ *=? *[0-9]{6}", re.compile(r"([0-9]{6})"))
    for h, component in HEADERS.items():
        for m in pat.finditer(runtime.read(h)):
            name, value = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            row = {"code": value, "name": name, "component": component, "category": category_of_name(int(value), name),
                   "source": f"{runtime.name}@{commit[:12]} {h}", "cann": version, "since": since.get(value, "")}  # fmt: skip
            if value in docs and docs[value][1]:
                row["source"] = f"{runtime.name}@{commit[:12]} {ACL_ERROR_DOC}#aclError ({value})"
                row["advice_sha"] = advice_sha("", docs[value][1])
                row["terms"] = terms(docs[value][1])
            out.append(row)
    return out


# torch_npu's error codes: ERR<submodule:02d><code:03d>, printed as "ERR01100 OPS call acl api failed"
# (torch_npu/csrc/core/npu/NPUException.cpp: submoduleMap and errCodeMap; the numbers as seen in real
# logs: ERR00100 PTA / ERR01100 OPS call acl api failed, ERR02200 DIST call hccl api failed,
# ERR02005 DIST internal error)
TORCH_NPU_FILE = "torch_npu/csrc/core/npu/NPUException.cpp"
TORCH_NPU_SOURCE = f"Ascend/pytorch {TORCH_NPU_FILE} (submoduleMap, errCodeMap)"
TORCH_NPU_SUBMODULES = ("PTA", "OPS", "DIST", "GRAPH", "PROF")
TORCH_NPU_CODES = {
    1: ("invalid parameter", "invalid_argument"), 2: ("invalid type", "invalid_argument"), 3: ("invalid value", "invalid_argument"),
    4: ("invalid pointer", "invalid_argument"), 5: ("internal error", "internal"), 6: ("memory error", "resource"),
    7: ("feature not supported", "unsupported"), 8: ("resource not found", "resource"), 9: ("resource unavailable", "resource"),
    10: ("system call failed", "config"), 11: ("timeout error", "device_wait"), 12: ("permission error", "device"),
    100: ("call acl api failed", "execution"), 200: ("call hccl api failed", "execution"), 300: ("call ge api failed", "execution"),
}  # fmt: skip


def torch_npu_codes(torch_npu: Checkout | None) -> list[dict[str, str]]:
    source, since = TORCH_NPU_SOURCE, ""
    if torch_npu is not None:  # pinned; the first release tag whose NPUException.cpp prints ERR codes
        source = f"{torch_npu.name}@{torch_npu.commit()[:12]} {TORCH_NPU_FILE} (submoduleMap, errCodeMap)"
        since = next((t for t in torch_npu.tags_by_date() if "errCodeMap" in torch_npu.show(t, TORCH_NPU_FILE)), "")
    out = []
    for sub_id, sub in enumerate(TORCH_NPU_SUBMODULES):
        for code, (message, category) in TORCH_NPU_CODES.items():
            out.append({"code": f"ERR{sub_id:02d}{code:03d}", "component": "torch_npu", "category": category,
                        "message": f"{sub} {message}", "source": source, "torch_npu": since})  # fmt: skip
    return out


def toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def check_advice(rows: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """How many codes npudiag's code_advice.toml words from their source, and the codes whose source
    has advice that code_advice.toml lacks or wrote from another text (new codes, changed sources)."""
    data = tomllib.loads(Path(ADVICE).read_text(encoding="utf-8"))
    written = {(c, a["source_sha"]) for a in data.get("advice", []) for c in a["codes"]}
    stale = [r["code"] for r in rows if r.get("advice_sha") and (r["code"], r["advice_sha"]) not in written]
    return sum(1 for r in rows if r.get("advice_sha")) - len(stale), stale


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__)
        return 2
    runtime, ge = Checkout(Path(argv[1]), "hicann/runtime"), Checkout(Path(argv[2]), "hicann/ge")
    torch_npu = Checkout(Path(argv[3]), "Ascend/pytorch") if len(argv) == 4 else None
    rows = e_codes(runtime, ge) + numeric_codes(runtime) + torch_npu_codes(torch_npu)
    seen: dict[str, dict[str, Any]] = {}
    for r in rows:
        seen.setdefault(r["code"], r)
    lines = [
        "# CANN's error-code catalogue as facts: code, printed message format (E/W codes) or constant name",
        "# (numeric ACL / runtime / GE codes), npudiag's category, the public file it comes from (repository@commit",
        "# path#anchor), the CANN release of that text (cann) and the first public release tag holding the code",
        "# (since; torch_npu: the first torch_npu release printing ERR codes). advice_sha pins the source's own",
        "# cause / solution that code_advice.toml words in npudiag's language; terms are the facts of that text",
        "# the wording must keep (tests/test_log_kb.py checks them). Generated by scripts/import_error_catalogue.py:",
        "# do not edit by hand, re-run the script.",
        "",
    ]
    for r in sorted(seen.values(), key=lambda r: (r["code"][0].isdigit(), r["code"])):
        lines.append("[[code]]")
        for k in ("code", "name", "component", "category", "message", "source", "cann", "since", "torch_npu", "advice_sha", "terms"):
            if r.get(k):
                lines.append(f"{k} = {json.dumps(r[k], ensure_ascii=False) if k == 'terms' else toml_str(r[k])}")
        lines.append("")
    Path(CATALOGUE).write_text("\n".join(lines), encoding="utf-8")
    worded, stale = check_advice(list(seen.values()))
    print(f"{len(seen)} codes; {worded + len(stale)} with the source's own cause / solution, {worded} of them worded in {ADVICE}")
    if stale:
        print(f"{len(stale)} codes need wording from their (new or changed) source text: {' '.join(stale)}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
