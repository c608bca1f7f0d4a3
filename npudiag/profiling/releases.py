"""Which CANN release each torch_npu release was built for, so ``check`` can say when a profile was
taken with a torch_npu and a CANN that were not released together.

Facts from Ascend/pytorch's own version tables: the "TorchNPU version mapping table" of its version
matching page (torch_npu 2.1.0.post10 - 2.12.0, CANN 8.0.0 - 9.1.0, with the historical rows back to
CANN 5.0.2) and README.zh.md's 昇腾辅助软件 table (commits 006ca002 and ebeeb37b, which list
2.1.0.post3 and 2.1.0.post4 for CANN 8.0.RC1). Each installation package version appears once: the
branch ``v{PyTorch}-{extension}`` of a package is built against one CANN release.
"""

from __future__ import annotations

import re

SOURCE = "Ascend/pytorch's torch_npu / CANN version table"

# torch_npu installation package version -> the CANN release it was built for
RELEASED_FOR: dict[str, str] = {
    **dict.fromkeys(("2.12.0", "2.11.0", "2.10.0.post4", "2.9.0.post6", "2.7.1.post8"), "9.1.0"),
    **dict.fromkeys(("2.9.0.post2", "2.8.0.post4", "2.7.1.post4"), "9.0.0"),
    **dict.fromkeys(("2.9.0", "2.8.0.post2", "2.7.1.post2", "2.6.0.post5"), "8.5.0"),
    **dict.fromkeys(("2.8.0", "2.7.1", "2.6.0.post3", "2.1.0.post17"), "8.3.RC1"),
    **dict.fromkeys(("2.6.0", "2.5.1.post1", "2.1.0.post13"), "8.2.RC1"),
    **dict.fromkeys(("2.5.1", "2.4.0.post4", "2.3.1.post6", "2.1.0.post12"), "8.1.RC1"),
    **dict.fromkeys(("2.4.0.post2", "2.3.1.post4", "2.1.0.post10"), "8.0.0"),
    **dict.fromkeys(("2.4.0", "2.3.1.post2", "2.1.0.post8"), "8.0.RC3"),
    **dict.fromkeys(("2.3.1", "2.2.0.post2", "2.1.0.post6", "1.11.0.post14"), "8.0.RC2"),
    **dict.fromkeys(("2.2.0", "2.1.0.post4", "2.1.0.post3", "1.11.0.post11"), "8.0.RC1"),
    **dict.fromkeys(("2.1.0", "2.0.1.post1", "1.11.0.post8"), "7.0.0"),
    **dict.fromkeys(("2.1.0.rc1", "2.0.1", "1.11.0.post4"), "7.0.RC1"),
    "1.11.0.post3": "6.3.RC3.1",
    "1.11.0.post2": "6.3.RC3",
    **dict.fromkeys(("2.0.1.rc1", "1.11.0.post1", "1.8.1.post2"), "6.3.RC2"),
    **dict.fromkeys(("1.11.0", "1.8.1.post1"), "6.3.RC1"),
    **dict.fromkeys(("1.5.0.post8", "1.8.1", "1.11.0.rc2"), "6.0.1"),
    **dict.fromkeys(("1.5.0.post7", "1.8.1.rc3", "1.11.0.rc1"), "6.0.RC1"),
    **dict.fromkeys(("1.5.0.post6", "1.8.1.rc2"), "5.1.RC2"),
    **dict.fromkeys(("1.5.0.post5", "1.8.1.rc1"), "5.1.RC1"),
    "1.5.0.post4": "5.0.4",
    "1.5.0.post3": "5.0.3",
    "1.5.0.post2": "5.0.2",
}

_PRE_RELEASE = re.compile(r"\.(alpha|beta|rc|b|t)\w*$", re.IGNORECASE)  # 8.5.0.alpha001: a build of 8.5.0


def released_for(torch_npu: str) -> str | None:
    """The CANN release ``torch_npu`` (a version as torch_npu records it, a local ``+...`` suffix
    allowed) was built for; None for a version the table does not hold."""
    return RELEASED_FOR.get(torch_npu.strip().split("+", 1)[0])


def same_release(cann: str, release: str) -> bool:
    """Whether a recorded CANN version is ``release`` (a community build such as 8.5.0.alpha001 is
    8.5.0; 6.3.RC3.1 is not 6.3.RC3)."""
    recorded, release = cann.strip().upper(), release.upper()
    if recorded == release:
        return True
    return recorded.startswith(release + ".") and _PRE_RELEASE.fullmatch(recorded[len(release) :]) is not None


def mismatch(torch_npu: str, cann: str) -> str | None:
    """One sentence when the two were not released together, None when they were or the torch_npu
    version is not in the table."""
    release = released_for(torch_npu)
    if release is None or same_release(cann, release):
        return None
    return (
        f"torch_npu {torch_npu} was released for CANN {release} ({SOURCE}); this profile was taken with CANN {cann}, "
        "a pair not released together: data the profiler should have written may be missing or fail to parse"
    )
