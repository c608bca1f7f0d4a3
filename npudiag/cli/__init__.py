"""The ``npudiag`` command: a thin Typer layer over the library (no analysis logic here).

One module per command (``analyze``, ``check``, ``report``, ``compare``, ``gate``, ``cluster``, ``sql``,
``profile``, ``doctor``; ``logs`` and ``dump`` with their sub-commands): parse the options, make one library
call, render, return the exit code. At the top each imports only Typer, the standard library and
npudiag modules that need neither pyarrow nor numpy (the options' declarations and checks: ``cli._out``,
``errors``, ``version``, ``output``, the collection and msnpureport modules); pandas, pyarrow, numpy
and Rich load when a command runs, so ``--help``, ``--version`` and TAB completion stay fast.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import sys
import threading
import warnings
from typing import Any

import typer

from npudiag import phases
from npudiag.cli import analyze as _analyze
from npudiag.cli import check as _check
from npudiag.cli import cluster as _cluster
from npudiag.cli import compare as _compare
from npudiag.cli import doctor as _doctor
from npudiag.cli import dump as _dump
from npudiag.cli import gate as _gate
from npudiag.cli import logs as _logs
from npudiag.cli import profile as _profile
from npudiag.cli import report as _report
from npudiag.cli import sql as _sql
from npudiag.errors import NpudiagError
from npudiag.report.escape import clean
from npudiag.version import __version__

EXIT_CODES = (
    (0, "ok; also when stdout is a closed pipe ('npudiag ... | head')"),
    (1, "a problem you asked to fail on: gate finding a regression, dump compare"),
    (None, "finding failing tensors (--no-fail: 0), check finding a problem in"),
    (None, "the collection, doctor finding a tool missing"),
    (2, "bad usage, unusable input, or an output that cannot be written"),
    (3, "a bug in npudiag (NPUDIAG_DEBUG=1 shows the traceback)"),
    (130, "interrupted (Ctrl-C)"),
)

ROOT_EPILOG = (
    "\b\nExit codes:\n"
    + "\n".join(f"  {'' if code is None else code:<4} {meaning}" for code, meaning in EXIT_CODES)
    + """

\b
Quick start:
  npudiag analyze PROF_000001_... --out npudiag-out/run1
  npudiag gate npudiag-out/base npudiag-out/run1 --quiet"""
)

app = typer.Typer(
    name="npudiag",
    help="Diagnostics for Huawei Ascend NPU (CANN) profiles: msprof and torch_npu profiler output, dumps and logs.",
    epilog=ROOT_EPILOG,
    no_args_is_help=True,
    rich_markup_mode=None,  # help is plain text: "[default: x]" and brackets in help strings are shown as written
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"npudiag {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Diagnostics for Huawei Ascend NPU (CANN) profiles."""


app.command("analyze", epilog=_analyze.ANALYZE_EXAMPLE)(_analyze.analyze)
app.command("report", epilog=_report.REPORT_EXAMPLE)(_report.report)
app.command("compare", epilog=_compare.COMPARE_EXAMPLE)(_compare.compare)
app.command("gate", epilog=_gate.GATE_EXAMPLE)(_gate.gate_cmd)
app.add_typer(_logs.app, name="logs")
app.add_typer(_dump.app, name="dump")
app.command("profile", context_settings=_profile.PROFILE_CONTEXT, epilog=_profile.PROFILE_EXAMPLE)(_profile.profile)
app.command("doctor", epilog=_doctor.DOCTOR_EXAMPLE)(_doctor.doctor)
app.command("cluster", epilog=_cluster.CLUSTER_EXAMPLE)(_cluster.cluster)
app.command("sql", epilog=_sql.SQL_EXAMPLE)(_sql.sql)
app.command("check", epilog=_check.CHECK_EXAMPLE)(_check.check)


# Click's exception classes, wherever this Typer keeps its Click (newer releases vendor it)
_cx = sys.modules[typer.BadParameter.__module__]
UsageError, ClickException, Abort = _cx.UsageError, _cx.ClickException, typer.Abort


class _PipeClosed(BaseException):
    """stdout's reader went away (``npudiag ... | head``). Not an Exception, so no handler on the way
    (Click's, a command's) mistakes it for an error; ``main`` ends quietly with 0."""


class _QuietPipe:
    """stdout that turns a closed pipe into _PipeClosed on the next write."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, data: str) -> int:
        try:
            return self._stream.write(data)
        except BrokenPipeError:
            raise _PipeClosed() from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise _PipeClosed() from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class _QuietStderr:
    """stderr whose reader may go away (``npudiag ... 2>&1 | head``): the rest of what npudiag says is
    dropped, the command goes on and its exit code is its own, never one made by the closed pipe."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._closed = False

    def write(self, data: str) -> int:
        if not self._closed:
            try:
                return self._stream.write(data)
            except BrokenPipeError:
                self._close()
        return len(data)

    def flush(self) -> None:
        if not self._closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._close()

    def _close(self) -> None:
        self._closed = True
        _silence_fd(2)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _usage_line(exc: UsageError) -> str:
    cmd = exc.ctx.command_path if exc.ctx is not None else "npudiag"
    return f"npudiag: {clean(exc.format_message())} (see '{cmd} --help')"


class _WithoutPandas:
    """An import finder under which pandas reads as not installed.

    pyarrow imports pandas (0.2 - 0.3 s and 25 - 40 MB here) the first time it converts anything, only
    to test whether its input is a pandas object. npudiag never gives it one and never uses pandas.
    pyarrow takes the failed import as "no pandas" for those tests. Its pandas functions
    (``to_pandas``...) try the import again when called, and succeed once this finder is removed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"npudiag commands run without {name}", name=name)
        return None


def main(argv: list[str] | None = None) -> None:
    """Entry point: every error is one line on stderr with its exit code (EXIT_CODES), never a traceback."""
    finder = None
    if "pandas" not in sys.modules:  # while the command runs; a caller that already has pandas keeps it
        finder = _WithoutPandas()
        sys.meta_path.insert(0, finder)
    try:
        _main(argv)
    except SystemExit as exc:
        if argv is None and exc.code in (130, 143):
            # Interrupted, as a process of its own: leave now with 130. What the interpreter does on its
            # way out (joining the reading threads, the pools' exit hooks) can meet the interrupt again and
            # end the process by the signal instead (exit -2, seen about once in 20 runs); the outputs are
            # already put back by then, and pool workers end with their parent (npudiag._orphans).
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(exc.code)
        raise
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)


def _main(argv: list[str] | None) -> None:
    sys.stdout = _QuietPipe(sys.stdout)  # type: ignore[assignment]
    sys.stderr = _QuietStderr(sys.stderr)  # type: ignore[assignment]
    # Arrow's allocator: the C library's unless the user chose one. Measured in docs/speed.md: with
    # pyarrow's default (mimalloc) memory freed after a multi-threaded read stays in the process
    # (a 1.95 GB trace peaked at 3.2 - 5.6 GB, 2.2 - 2.5 GB with this) and page faults cost seconds of system time
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    if not os.environ.get("NPUDIAG_DEBUG"):  # a library's deprecation notice is for npudiag's developers, not its users
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
    _sane_columns()
    command = typer.main.get_command(app)
    before, before_term = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    interrupted = _note_interrupts()
    terminated = _note_terminations()
    before_hook = sys.unraisablehook
    sys.unraisablehook = _redelivering(interrupted, terminated, before_hook)
    try:
        code = command.main(args=argv if argv is not None else sys.argv[1:], prog_name="npudiag", standalone_mode=False)
        code = code if isinstance(code, int) else 0
        if terminated and code == 130:
            print("npudiag: terminated", file=sys.stderr)
            code = 143
        elif interrupted and code == 130:  # Typer turns Ctrl-C into a silent exit code 130: say it
            print("npudiag: interrupted", file=sys.stderr)
    except _PipeClosed:
        _silence_fd(1)
        code = 0
    except UsageError as exc:
        print(_usage_line(exc), file=sys.stderr)
        code = 2
    except ClickException as exc:
        print(f"npudiag: {clean(exc.format_message())}", file=sys.stderr)
        code = exc.exit_code
    except NpudiagError as exc:  # the one place library errors become exit codes
        print(f"npudiag: {clean(exc.one_line())}", file=sys.stderr)
        code = exc.exit_code
    except (KeyboardInterrupt, Abort):
        # SIGTERM (kill, a CI timeout) unwinds as Ctrl-C does: outputs put back, staging and lock removed
        print(f"npudiag: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        code = 143 if terminated else 130
    except Exception as exc:  # noqa: BLE001 - last line of defence for the user
        if os.environ.get("NPUDIAG_DEBUG"):
            raise
        print(
            f"npudiag: internal error: {type(exc).__name__}: {clean(exc)} (set NPUDIAG_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        code = 3
    if phases.enabled():
        _print_phases()
    try:
        sys.stdout.flush()
    except _PipeClosed:
        _silence_fd(1)
        code = 0 if code in (0, 1) else code
    if (
        interrupted is not None and before is signal.default_int_handler
    ):  # a caller in this process gets its handler back
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGINT, before)
    if before_term is signal.SIG_DFL:
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, before_term)
    sys.unraisablehook = before_hook
    sys.exit(code)


def _redelivering(interrupted: list[int], terminated: list[int], before: Any) -> Any:
    """An unraisable-exception hook for the run. A signal that lands while the interpreter runs a callback
    it cannot raise out of (importlib's module-lock weakref callback, a ``__del__``) had its KeyboardInterrupt
    printed as "Exception ignored ... Traceback" and dropped, and the run went on. Such an interrupt is
    delivered again instead, so it unwinds the run from ordinary code; any other exception goes to the
    hook there was before."""

    def hook(unraisable: Any) -> None:
        got = terminated or interrupted
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and got:
            # not from here: a handler run inside this hook is unraisable too. A moment later, from a
            # thread of its own, the signal reaches the main thread back in the code it was running.
            again = threading.Timer(0.01, _thread.interrupt_main, args=(got[-1],))
            again.daemon = True
            again.start()
            return
        before(unraisable)

    return hook


def _sane_columns() -> None:
    """COLUMNS of 0 (or any width no table fits) made every report print nothing: below 20 it is
    taken as unknown, 80."""
    cols = os.environ.get("COLUMNS")
    if cols is not None and (not cols.strip().isdigit() or int(cols) < 20):
        os.environ["COLUMNS"] = "80"


def _note_terminations() -> list[int]:
    """A list that gets an entry when SIGTERM arrives, which then raises KeyboardInterrupt: the run
    unwinds as for Ctrl-C (what it was writing is put back) and exits 143 instead of dying at once and
    leaving its lock and staging folder behind. Left alone where SIGTERM is handled by someone else."""
    seen: list[int] = []
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:

        def on_term(signum: int, frame: object) -> None:
            seen.append(signum)
            raise KeyboardInterrupt

        with contextlib.suppress(ValueError):  # not the main thread: leave it
            signal.signal(signal.SIGTERM, on_term)
    return seen


def _print_phases() -> None:
    """NPUDIAG_PHASES=1: each timed phase, one line on stderr (npudiag.phases)."""
    print("npudiag: phases (start, wall, process CPU in every thread; seconds)", file=sys.stderr)
    for p in phases.taken():
        print(f"  {p.start_s:7.3f} {p.wall_s:7.3f} {p.cpu_s:7.3f}  {p.name}  [{p.thread}]", file=sys.stderr)


def _note_interrupts() -> list[int]:
    """A list that gets an entry when SIGINT arrives (which still raises KeyboardInterrupt), so the
    exit says why it happened; left alone where SIGINT is ignored or handled by someone else."""
    seen: list[int] = []
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:

        def on_interrupt(signum: int, frame: object) -> None:
            seen.append(signum)
            raise KeyboardInterrupt

        with contextlib.suppress(ValueError):  # not the main thread (a library caller): leave it
            signal.signal(signal.SIGINT, on_interrupt)
    return seen


def _silence_fd(fd: int) -> None:
    """Point ``fd`` at /dev/null so the interpreter's own flush at exit does not complain."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
