"""What both CANN log parsers share: levels, error codes, the plog header, message caps.

``ascend_log`` (the line-by-line parser of every form) and ``plog_fast`` (the vectorised path for
chunks that are pure plog) both build on this module; neither imports the other's internals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CONTINUATION_LINES = 400  # a record longer than this is split, so one runaway block cannot grow unbounded
MAX_MESSAGE_CHARS = 16_384  # a record's message; longer is cut with a note (real records are a few hundred characters)

LEVELS = {
    "ERROR": "ERROR",
    "WARNING": "WARNING",
    "WARN": "WARNING",
    "INFO": "INFO",
    "DEBUG": "DEBUG",
    "EVENT": "EVENT",
    "TRACE": "TRACE",
    "OPLOG": "OPLOG",
    "FATAL": "FATAL",
    "CRITICAL": "FATAL",
}
# records at these levels are information: never an error record, whatever codes they mention (GE
# registers its whole error-code catalogue at INFO: "ParseJsonFile:add error_code E10001 success")
QUIET_LEVELS = ("INFO", "DEBUG", "EVENT", "TRACE", "OPLOG")
PROBLEM_LEVELS = ("FATAL", "ERROR")

# 2nd character of a CANN error code -> component (CANN error code reference)
CODE_MODULES = {
    "1": "GE",
    "2": "FE",
    "3": "AICPU",
    "4": "TEFUSION",
    "7": "OP_PLUGIN",
    "8": "VECTOR_OP",
    "B": "TBE",
    "C": "AUTOTUNE",
    "D": "RLTUNE",
    "E": "RUNTIME",
    "F": "LXFUSION",
    "G": "AOE",
    "H": "ASCENDCL",
    "I": "HCCL",
    "J": "HCCP",
    "K": "PROFILING",
    "L": "DRV",
    "M": "QUEUE_SCHEDULE",
    "N": "DVPP",
    "O": "AMCT",
    "P": "DUMP",
    "Z": "OPS",
}


def ascii_re(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A line-parser pattern whose \\d, \\w, \\s and \\b are ASCII, as RE2's on the vectorised path: Python's take
    any script's digits, letters and spaces, and the two paths would read such a line differently. The
    formats are ASCII."""
    return re.compile(pattern, flags | re.ASCII)


PLOG_TS = r"\d{4}-\d{2}-\d{2}-\d{2}:\d{2}:\d{2}\.\d{3}\.\d{3}"
PLOG_LEVEL = r"ERROR|WARNING|INFO|DEBUG|EVENT|TRACE|OPLOG"
# Documented: [Level] ModuleName(PID,PName):DateTimeMS [FileName:LineNumber]LogContent. Firmware
# (TSCH) writes PID -1. Every repetition is bounded: a crafted line must not make a search quadratic.
PLOG = ascii_re(
    r"\[(" + PLOG_LEVEL + r")\] ([A-Za-z_0-9]{1,32})\((-?\d{1,10}),([^)\n]{0,128})\):(" + PLOG_TS + r")"
    r"(?: \[([^\]:\n]{1,256}):(\d{1,9})\])?"
)
# the TS firmware's content after the header (no [file:line]): a sequence number, the core, then
# path:line function: -- 2020 "17 (cpuid:0) ../x/ai_core_dispatcher.c:1193 bs_done_exception_proc: slot_id=0"
# and later "3986 (dieid:0,cpuid:0) stars_timewheel.c:90 stars_wait_sqe_is_timeout: Timeout: ..."
TSCH_CONTENT = (
    r"^ ?\d{1,10} \((?:dieid:\d{1,4},)?cpuid:\d{1,4}\) (?P<f>[^\s:]{1,256}):(?P<l>\d{1,9}) (?P<fn>\w{1,128}):"
)
TSCH_RE = ascii_re(TSCH_CONTENT)
# the kernel's own level inside a line the device's klogd forwarded into a plog-format file:
# "[EVENT] KERNEL(1396,None):... [klogd.c:248][2204.894988] [ascend] [ERROR] [devdrv] ..."
KERNEL_LEVEL = r"\[ascend\] \[(?P<lv>ERROR|WARNING|WARN|INFO|DEBUG|EVENT)\]"
# the device and rank a line states (RE2 and Python re alike; named groups d and r). HCCL's
# LINK_ERROR_INFO table names this process's logical device ("comm error, device[N]") and, in its rows,
# the peer and this rank ("| dest_ip(user_rank) | [dest_port |] src_ip(user_rank) | ..."); its socket
# timeout names this rank ("wait socket establish timeout, role[R] rank[N]", HcclSocketManager's userRank_).
# Each repetition is followed by a character it cannot match, so no input backtracks (tests/test_hostile.py).
DEVICE_HINT = "dev"  # every form of DEVICE_IN_TEXT holds it: both paths search only texts that do
DEVICE_IN_TEXT = r"(?:device\((?:chipId:)?|\bdevice_id=|\bdeviceId[=\[]|\bdevId[:=] ?|comm error, device\[)(?P<d>\d+)"
# every form of RANK_IN_TEXT holds one of these ("[Rank ", "rank[", a link table's row): both paths search
# only texts that do (literal scans, where the forms' alternation reads every byte)
RANK_HINTS = ("ank", "|")
RANK_IN_TEXT = (
    r"\[Rank (?P<r>\d+)\]|wait socket establish timeout, role\[\d+\] rank\[(?P<r2>\d+)\]"
    r"|^\s*(?:\[\d+\]\s*)?\|\s*[0-9A-Fa-f.:]+\(\d+\)\s*\|\s*(?:\d+\s*\|\s*)?[0-9A-Fa-f.:]+\((?P<r3>\d+)\)"
)
KERNEL_LEVEL_RE = ascii_re(KERNEL_LEVEL)

CANN_CODE = r"[EWI][0-9A-Z]\d{4}"
# error codes: CANN 6-character codes, torch_npu ERRxxxxx, ACL/runtime 6-digit codes in the contexts they are printed in
CODES = ascii_re(r"(?<![A-Za-z0-9_])(" + CANN_CODE + r"|ERR\d{5})(?![A-Za-z0-9_])")
ACL_CODE = ascii_re(
    r"(?:err(?:or)? ?code(?: is)?|retCode|ret|runtime result|rtRet|result|failed)[ "
    r"\t]{0,8}(?:is[ \t]{1,8})?(?:[:=][ \t]{0,8})?"
    r"\[?(\d{6})(?!\d|\.\d)",
    re.IGNORECASE,
)
_SIX_DIGITS = ascii_re(r"\d{6}")  # what an ACL code needs, found before ACL_CODE's slower search
CODE_HINT = ascii_re(r"[EWI][0-9A-Z]\d{4}|ERR\d{5}|\d{6}")
# the same, as an RE2 pattern for pyarrow (which rows may hold a code at all)
# (ACL_CODE's words end up to 31 characters before their digits: " is", 8 blanks, "is" and 8, ":" and 8, "[")
CODE_HINT_RE2 = r"[EWI][0-9A-Z]\d{4}|ERR\d{5}|(?i:code|ret|result|failed)[^0-9\n]{0,31}\d{6}"

_CUT_NOTE = re.compile(r" \[\.\.\. ([\d,]+) more characters cut by npudiag\]$")


BLANK_RUN = (
    64  # this many blank lines in a row travel as one BlankRun (a file of newlines costs its bytes, not a loop each)
)


class BlankRun(str):
    """``count`` consecutive blank lines, read as one: the parser treats them as the one blank line
    they mean to it and numbers the lines after them as if each had been read."""

    count: int

    def __new__(cls, count: int) -> BlankRun:
        obj = super().__new__(cls, "")
        obj.count = count
        return obj


class Block(list):
    """Lines read a block at a time (a megabyte of a file): each already cleaned as the parser takes a
    line (no line end, at most MAX_MESSAGE_CHARS, valid UTF-8), none of them a run of BLANK_RUN blank
    lines (those come as a BlankRun between blocks). The parser extends its buffer by a whole block:
    no Python step per line on the way in."""


@dataclass
class LogContext:
    """What the file's path says about its records (applied where a record does not say itself)."""

    file: str
    origin: str = "console"
    device_id: int | None = None
    rank: int | None = None
    pid: int | None = None


def cap_message(msg: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """A record's message of at most ``limit`` characters and a note of how many were cut (counting an
    earlier cut of the same text): one runaway record cannot hold the memory of a whole log."""
    if len(msg) <= limit:
        return msg
    earlier = 0
    if (m := _CUT_NOTE.search(msg[-64:])) is not None:
        earlier = int(m.group(1).replace(",", ""))
        msg = msg[: len(msg) - (64 - m.start()) if len(msg) > 64 else m.start()]
    return msg[:limit] + f" [... {len(msg) - limit + earlier:,} more characters cut by npudiag]"


def error_codes(text: str) -> list[str]:
    """Distinct codes in order: CANN (EZ9999, EI0002...), torch_npu (ERR01100) and ACL 6-digit codes in known
    contexts."""
    if not CODE_HINT.search(text):
        return []
    found: dict[str, None] = {}
    for m in CODES.finditer(text.replace("\\n", "\n")):
        found[m.group(1)] = None
    for m in ACL_CODE.finditer(text) if _SIX_DIGITS.search(text) else ():
        code = m.group(1)
        if code[0] in "12345":
            found[code] = None
    return list(found)


def plog_pid(text: str) -> int | None:
    """A plog header's PID; firmware's -1 means "no process"."""
    pid = int(text)
    return pid if pid >= 0 else None
