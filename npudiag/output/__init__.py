"""Every file and folder npudiag writes goes through this package, under one discipline.

Never lose a user's file:

- **A folder** (``--out``, ``--npy``, ``--update-baseline``) is built in a hidden staging folder
  beside it (``.<name>.tmp-*``, marked with the pid that made it) and swapped in whole by one
  atomic exchange of names (``renameat2(RENAME_EXCHANGE)`` where the kernel has it). A kill -9 or a
  full disk at any moment leaves the old complete folder or the new complete one; the next run
  removes what a killed run left. Its ``manifest.json`` lists every file npudiag put there.
- **An existing folder is replaced only when npudiag wrote it**: its manifest is npudiag's and every
  file in it is one the manifest lists (or it is empty). Anything else is refused with one line
  naming what would be lost. ``force`` may replace a folder of other files, but never a file,
  ``/``, HOME, the working directory or one of its ancestors, an input or an ancestor of an input.
- **A single file** (``--html``, ``--chrome-trace``, ``--junit``, configs) is written to a temporary
  name and renamed over a regular file only. A FIFO or a character device (``/dev/null``) is written
  into, never replaced; ``/dev/stdout`` and ``/dev/fd/N`` stream into the open descriptor. A folder,
  socket or block device where a file is expected is one line, exit 2.
- **Links**: a link given as the target is resolved once; it is followed only when the user could
  have made it (it is theirs, or it does not sit in a world-writable sticky folder such as /tmp) and
  points somewhere they may write. Lock files are opened without following links.
- **What others read is strict**: JSON without NaN / Infinity (``null``, the places listed), CSV
  cells that a spreadsheet would run as a formula neutralised, file names made unique.

Nothing here imports pyarrow at import time: the CLI's light paths use it too.

By concern: :mod:`.encode` (strict JSON, CSV cells, unique names), :mod:`.guard` (where a write may go),
:mod:`.manifest` (reading an out folder's manifest, foreign entries), :mod:`.files` (single files),
:mod:`.folders` (staging, locking, swapping folders) and :mod:`.system` (process and rename calls).
"""

from __future__ import annotations

from npudiag.output.encode import (
    INVISIBLE,
    UniqueNames,
    csv_cell,
    csv_column,
    dumps,
    escape_invisible,
    json_safe,
    strict,
)
from npudiag.output.files import (
    append_file,
    atomic_write,
    move_new,
    write_file,
    write_json,
    write_manifest,
    write_new_file,
)
from npudiag.output.folders import (
    NEW,
    OLD,
    STAGING_MARKER,
    FolderTarget,
    OutputFolder,
    TargetLock,
    remove_staging,
    remove_stale_staging,
    swap_in,
)
from npudiag.output.guard import current_umask, protected_reason
from npudiag.output.manifest import (
    FOREIGN_SHOWN,
    MANIFEST,
    WALK_LIMIT,
    foreign_entries,
    npudiag_manifest,
    out_folder_of,
)

__all__ = [
    "FOREIGN_SHOWN",
    "FolderTarget",
    "INVISIBLE",
    "MANIFEST",
    "NEW",
    "OLD",
    "OutputFolder",
    "STAGING_MARKER",
    "TargetLock",
    "UniqueNames",
    "WALK_LIMIT",
    "append_file",
    "atomic_write",
    "csv_cell",
    "csv_column",
    "current_umask",
    "dumps",
    "escape_invisible",
    "foreign_entries",
    "json_safe",
    "move_new",
    "npudiag_manifest",
    "out_folder_of",
    "protected_reason",
    "remove_staging",
    "remove_stale_staging",
    "strict",
    "swap_in",
    "write_file",
    "write_json",
    "write_manifest",
    "write_new_file",
]
