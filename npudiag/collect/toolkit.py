"""Finding the CANN toolkit, msprof, msnpureport, the driver and npu-smi, and saying what to fix.

Search order for the toolkit: ``ASCEND_TOOLKIT_HOME``, ``ASCEND_HOME_PATH`` (what ``set_env.sh``
exports), then ``/usr/local/Ascend/ascend-toolkit/latest``, ``/usr/local/Ascend/cann`` (newer
default install dir) and ``$HOME/Ascend/ascend-toolkit/latest``. msprof lives in
``<toolkit>/tools/profiler/bin`` (CANN msprof user guide) and is on PATH once ``set_env.sh`` is
sourced.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from npudiag.errors import InputError
from npudiag.safeio import read_bytes_limited

DRIVER_DIR = Path("/usr/local/Ascend/driver")
# where the driver puts msnpureport when its folder is not on PATH
DRIVER_TOOL_DIRS = ["/usr/local/Ascend/driver/tools", "/usr/local/Ascend/driver/tools/msnpureport"]


@dataclass
class Check:
    name: str
    ok: bool
    found: str | None  # path or version
    fix: str | None  # what to do when not ok

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _default_toolkits() -> list[Path]:
    home = Path(os.environ.get("HOME", str(Path.home())))
    return [
        Path("/usr/local/Ascend/ascend-toolkit/latest"),
        Path("/usr/local/Ascend/cann"),
        home / "Ascend" / "ascend-toolkit" / "latest",
    ]


def find_msnpureport() -> Path | None:
    """msnpureport on PATH, else in the driver's tools folders; None when neither has it."""
    found = shutil.which("msnpureport")
    if found:
        return Path(found)
    for d in DRIVER_TOOL_DIRS:
        p = Path(d) / "msnpureport"
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def find_toolkit() -> tuple[Path | None, bool]:
    """(toolkit folder, whether it came from the environment, i.e. set_env.sh was sourced)."""
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        v = os.environ.get(var)
        if v and Path(v).is_dir():
            return Path(v), True
    for p in _default_toolkits():
        if p.is_dir():
            return p, False
    return None, False


def set_env_script(toolkit: Path) -> Path:
    """The set_env.sh to source: ``<install>/ascend-toolkit/set_env.sh`` beside ``latest``, else inside."""
    for candidate in (toolkit.parent / "set_env.sh", toolkit / "set_env.sh", toolkit / "bin" / "setenv.bash"):
        if candidate.is_file():
            return candidate
    return toolkit.parent / "set_env.sh"


def _small_text(path: Path) -> str | None:
    """A version file's text: a regular file of at most 64 KB (a link to /dev/zero read until
    MemoryError, a FIFO hung doctor), else None."""
    try:
        return read_bytes_limited(path, 64 << 10).decode("utf-8", errors="replace")
    except InputError:
        return None


def toolkit_version(toolkit: Path) -> str | None:
    files = [*toolkit.glob("*/ascend_toolkit_install.info"), toolkit / "version.cfg", *toolkit.glob("*/version.info")]
    for f in files:
        text = _small_text(f)
        if text is None:
            continue
        m = re.search(r"^\s*(?:version|Version)\s*=\s*(\S+)", text, re.MULTILINE)
        if m:
            return m.group(1)
    return None


def find_msprof(toolkit: Path | None) -> Path | None:
    found = shutil.which("msprof")
    if found:
        return Path(found)
    if toolkit is not None:
        p = toolkit / "tools" / "profiler" / "bin" / "msprof"
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def driver_version() -> str | None:
    text = _small_text(DRIVER_DIR / "version.info")
    if text is None:
        return None
    m = re.search(r"^\s*Version\s*=\s*(\S+)", text, re.MULTILINE | re.IGNORECASE)
    return m.group(1) if m else "installed"


def doctor() -> list[Check]:
    toolkit, sourced = find_toolkit()
    checks = []
    if toolkit is None:
        checks.append(
            Check(
                "toolkit",
                False,
                None,
                "CANN toolkit not found: install Ascend-cann-toolkit, then source "
                "<install dir>/ascend-toolkit/set_env.sh "
                "(or set ASCEND_TOOLKIT_HOME)",
            )
        )
    else:
        ver = toolkit_version(toolkit)
        fix = None if sourced else f"the toolkit's environment is not set: source {set_env_script(toolkit)}"
        checks.append(Check("toolkit", sourced, f"{toolkit} ({ver or 'version unknown'})", fix))
    msprof = find_msprof(toolkit)
    checks.append(
        Check(
            "msprof",
            msprof is not None,
            str(msprof) if msprof else None,
            None
            if msprof
            else (
                f"msprof not found: source {set_env_script(toolkit)} (it lives in <toolkit>/tools/profiler/bin)"
                if toolkit
                else "msprof not found: install the CANN toolkit and source its set_env.sh"
            ),
        )
    )
    mr = find_msnpureport()
    checks.append(
        Check(
            "msnpureport",
            mr is not None,
            str(mr) if mr else None,
            None if mr else "msnpureport not found: it ships with the NPU driver (driver/tools)",
        )
    )
    dv = driver_version()
    checks.append(
        Check(
            "driver",
            dv is not None,
            dv,
            None if dv else f"NPU driver not found in {DRIVER_DIR}: install the Ascend driver and firmware",
        )
    )
    smi = shutil.which("npu-smi")
    checks.append(
        Check("npu-smi", smi is not None, smi, None if smi else "npu-smi not found: it ships with the NPU driver")
    )
    return checks


def first_problem(checks: list[Check], needed: str) -> str | None:
    """The one-line advice when ``needed`` (or the toolkit behind it) is not usable."""
    by = {c.name: c for c in checks}
    if needed in by and by[needed].ok:
        return None
    return by[needed].fix if needed in by else None
