"""Files ope writes: checked before the work starts, never an input, written atomically.

One home for every writer of the command line (``ope learn --out``, ``ope import --out``, JSON
and report files) and of the Python API:

- :func:`check_outputs` is called *before* any long step (a fit, an import), so a bad
  destination fails in milliseconds, not after ten minutes of work. A destination is refused
  (``ope.ParameterError`` naming the flag or argument) when it is one of the inputs (the same
  file through a symbolic or hard link too: ``st_dev``/``st_ino`` are compared), lies inside an
  input directory (the next read of that directory would take it for logs), is a directory or a
  special file (FIFO, device), exists and ``force`` is not set, or its folder is missing; and
  when two destinations are the same file. A destination the system will not let ope create
  (the folder not writable or on a read-only file system: a file is created there and removed
  as a probe; with ``force``, an existing file the user cannot write) is an
  ``ope.OutputError`` (the command line's exit code 73).
- :func:`atomic_path` gives the temporary file to write (in the destination's folder, so the
  rename cannot cross file systems); on success the file is flushed to disk (``fsync``) and
  moved to the destination. Without ``force`` the move never replaces a file: one that appeared
  during the work (another process writing the same path) stays, and this writer fails with
  the same ``ParameterError`` as the check (``renameat2(RENAME_NOREPLACE)`` on Linux, else a
  hard link, else an exclusive create of the name then a rename over it). With ``force`` it is
  ``os.replace`` (atomic on POSIX and Windows). On any failure, ``KeyboardInterrupt`` included,
  the temporary file is removed; a write that fails for lack of space, quota or permission
  (:data:`CANNOT_WRITE_ERRNOS`) is an ``ope.OutputError`` naming the path and the reason. A
  crash therefore leaves either the old file or the new one, never a half-written one.

Examples
--------
>>> import os, tempfile
>>> from ope._output import atomic_path, check_outputs
>>> folder = tempfile.mkdtemp()
>>> out, = check_outputs([("--out", os.path.join(folder, "policy.csv"))])
>>> with atomic_path(out) as tmp:
...     _ = tmp.write_text("event_id,policy,action,probability\\n")
>>> sorted(os.listdir(folder))
['policy.csv']
>>> check_outputs([("--out", out)])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ope.exceptions.ParameterError: argument --out: ... exists; pass --force to overwrite it (...).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final, Union

from ope.exceptions import OutputError, ParameterError

__all__ = [
    "PathArg",
    "CANNOT_WRITE_ERRNOS",
    "check_outputs",
    "check_utf8_destination",
    "is_utf8_path",
    "atomic_path",
    "same_file",
    "output_error",
    "request_stop",
    "stop_requested",
    "clear_stop",
]

#: errno values that mean "the system will not let this file be written" (as opposed to a bug):
#: no space, file too large, quota exceeded, no permission, read-only file system. A write
#: failing with one of them is an ``ope.OutputError`` (command line: exit 73).
CANNOT_WRITE_ERRNOS: Final = frozenset(
    code
    for code in (
        getattr(errno, name, None)
        for name in ("ENOSPC", "EFBIG", "EDQUOT", "EACCES", "EPERM", "EROFS")
    )
    if code is not None
)

#: Signals received while a command runs, recorded by the command line's handlers
#: (:func:`request_stop`). Once one is pending no temporary file is moved to its destination,
#: even when the exception the handler raised was lost (Python drops an exception raised while
#: a ``__del__`` runs, e.g. a parquet writer's).
_STOP: list[int] = []

#: ``renameat2`` flag: fail with EEXIST rather than replace the destination (Linux >= 3.15)
_RENAME_NOREPLACE: Final = 1
#: ``renameat2``'s "relative to the current directory" descriptor
_AT_FDCWD: Final = -100

#: a path as the callers give it
PathArg = Union[str, "os.PathLike[str]"]


def _stat(path: Path) -> os.stat_result | None:
    """``os.stat`` following links, or None when the path (or its link target) does not exist."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # a link loop, a name too long, no permission to look
        raise ParameterError(f"cannot inspect {str(path)!r}: {exc.strerror or exc}.") from None


def same_file(a: PathArg, b: PathArg) -> bool:
    """Whether two paths name the same existing file (links resolved: device and inode)."""
    sa, sb = _stat(Path(a)), _stat(Path(b))
    return sa is not None and sb is not None and (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` would be created inside the directory ``folder`` (links resolved)."""
    try:
        target = path.parent.resolve(strict=False) / path.name
        root = folder.resolve(strict=False)
    except (OSError, RuntimeError):  # a link loop: not inside anything we can name
        return False
    return root == target or root in target.parents


def _check_one(
    flag: str,
    path: Path,
    inputs: Sequence[tuple[str, Path]],
    *,
    force: bool,
    force_flag: str,
    suffixes: Sequence[str] | None,
) -> None:
    where = f"argument {flag}: {str(path)!r}"
    if not str(path) or path.name in ("", ".", ".."):
        raise ParameterError(f"argument {flag}: needs a file name; got {str(path)!r}.")
    if suffixes is not None and path.suffix.lower() not in suffixes:
        # .htm and .pq are other spellings of .html and .parquet: one format, no choice
        choice = len({s for s in suffixes if s not in (".htm", ".pq")}) > 1
        raise ParameterError(
            f"{where} must end in {' or '.join(suffixes)}"
            + (" (the suffix chooses the format)." if choice else ".")
        )
    st = _stat(path)
    for label, source in inputs:  # loop over the command's inputs (a handful)
        src = _stat(source)
        if st is not None and src is not None and same_file(path, source):
            raise ParameterError(
                f"{where} is the input {label} ({str(source)!r}); writing it would destroy the "
                "input. Write elsewhere."
            )
        if src is not None and stat.S_ISDIR(src.st_mode) and _inside(path, source):
            raise ParameterError(
                f"{where} lies inside the input directory {label} ({str(source)!r}); the next "
                "read of that directory would take it for logs. Write elsewhere."
            )
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ParameterError(f"{where} is a directory; name a file.")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise ParameterError(f"{where} is not a regular file (a FIFO or a device); name a file.")
    if os.path.lexists(path) and not force:
        raise ParameterError(
            f"{where} exists; pass {force_flag} to overwrite it (or write elsewhere)."
        )
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ParameterError(
            f"{where}: the folder {str(parent)!r} does not exist; create it first."
        )
    _probe(flag, path, parent, replacing=st is not None)


def output_error(path: PathArg, exc: OSError, *, flag: str | None = None) -> OutputError:
    """The ``OutputError`` of a failed write of ``path``: the path and the errno's meaning."""
    code = exc.errno
    reason = os.strerror(code) if code else (exc.strerror or str(exc))
    name = errno.errorcode.get(code, "") if code else ""
    head = f"argument {flag}: " if flag else ""
    fix = (
        "free space (or the quota) or write elsewhere"
        if code in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", -1))
        else "fix the permissions or write elsewhere"
        if code in (errno.EACCES, errno.EPERM)
        else "the folder takes no new files (a virtual file system such as /proc?); write elsewhere"
        if code == errno.ENOENT
        else "write elsewhere"
    )
    return OutputError(
        f"{head}cannot write {str(os.fspath(path))!r}: {reason}"
        f"{f' ({name})' if name else ''}; {fix}."
    )


def _probe(flag: str, path: Path, parent: Path, *, replacing: bool) -> None:
    """Refuse a destination the system will not let us create (``OutputError``): a file
    created and removed in the folder tells a folder without write permission, a read-only
    file system and one without free inodes apart (the errno is the system's own); and, when
    an existing file is to be replaced, that file not writable by the user (``os.access``)."""
    if replacing and not os.access(path, os.W_OK):
        raise output_error(path, PermissionError(errno.EACCES, "not writable"), flag=flag)
    probe = parent / f".ope-probe-{secrets.token_hex(4)}"  # short: any folder can name it
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:  # whatever the reason, nothing can be created there
        raise output_error(parent, exc, flag=flag) from None
    os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(probe)


def is_utf8_path(path: str) -> bool:
    """Whether ``path`` is valid UTF-8: a name of bytes that no text decodes to (which Python
    keeps as surrogate escapes) is not, and pyarrow opens and writes UTF-8 paths only."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_utf8_destination(path: str, where: str) -> None:
    """An OutputError when ``path`` is not valid UTF-8 (:func:`is_utf8_path`). ``where`` names
    the flag or argument (``"argument --out"``, ``"`path`"``)."""
    if not is_utf8_path(path):
        raise OutputError(
            f"{where}: {path!r} is not valid UTF-8 (bytes that no text decodes to, shown as "
            "\\udcXX), and pyarrow writes only to UTF-8 paths; name the file in UTF-8."
        )


def check_outputs(
    outputs: Sequence[tuple[str, PathArg]],
    *,
    inputs: Sequence[tuple[str, PathArg]] = (),
    force: bool = False,
    force_flag: str = "--force",
    suffixes: Sequence[str] | None = None,
) -> list[Path]:
    """Check every destination before the work starts; return them as paths.

    Parameters
    ----------
    outputs : sequence of (flag, path)
        Each file to be written, with the flag (``"--out"``) or argument (``"path"``) that
        named it, for the messages.
    inputs : sequence of (label, path), optional
        The files and directories the work reads (``("LOGS", "logs/")``).
    force : bool, default False
        Allow overwriting an existing destination (never an input).
    force_flag : str, default "--force"
        How the message tells the user to allow overwriting (``"force=True"`` in Python).
    suffixes : sequence of str, optional
        Accepted file suffixes (lower case, with the dot), e.g. ``(".parquet", ".csv")``.

    Raises
    ------
    ope.ParameterError
        A destination is empty or blank, an input or inside an input directory, a directory
        or a special file, exists without ``force``, has a wrong suffix, or its folder is
        missing; or two destinations are the same file.
    ope.OutputError
        The system will not let the file be created: its folder is not writable or on a
        read-only file system (a probe file is created and removed there), or, with ``force``,
        the existing file is not writable by the user.
    """
    for flag, raw in outputs:  # '' would mean the current folder, ' ' a file nobody sees
        if not isinstance(raw, (str, os.PathLike)) or not isinstance(os.fspath(raw), str):
            raise ParameterError(
                f"argument {flag}: must be a file name (str or os.PathLike); got {raw!r:.80}."
            )
        if not os.fspath(raw).strip():
            raise ParameterError(f"argument {flag}: needs a file name; got {os.fspath(raw)!r}.")
        check_utf8_destination(os.fspath(raw), f"argument {flag}")
    paths = [Path(os.fspath(p)) for _, p in outputs]
    sources = [(label, Path(os.fspath(p))) for label, p in inputs]
    for (flag, _), path in zip(outputs, paths):  # loop over the destinations (a handful)
        _check_one(flag, path, sources, force=force, force_flag=force_flag, suffixes=suffixes)
    seen: dict[str, str] = {}
    for (flag, _), path in zip(outputs, paths):
        key = os.path.normcase(os.path.abspath(path))
        if key in seen:
            raise ParameterError(
                f"argument {flag}: {str(path)!r} is also the destination of {seen[key]}; "
                "name different files."
            )
        seen[key] = flag
    return paths


def _fsync(path: Path, *, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if directory:  # some platforms cannot open a folder: the rename is still atomic
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


def request_stop(signum: int) -> None:
    """Record that signal ``signum`` asked the process to stop: no output is moved after."""
    _STOP.append(signum)


def stop_requested() -> int | None:
    """The first signal recorded by :func:`request_stop` (None when none is pending)."""
    return _STOP[0] if _STOP else None


def clear_stop() -> None:
    """Forget the recorded signals (a new command starts)."""
    _STOP.clear()


def _renameat2() -> Callable[..., int] | None:
    """libc's ``renameat2`` (glibc >= 2.28), or None where the platform lacks it."""
    if not hasattr(os, "link") or os.name != "posix":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        func = libc.renameat2
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


def _move_noreplace(tmp: Path, dest: Path) -> None:
    """Move ``tmp`` to ``dest`` unless ``dest`` exists (``FileExistsError`` then): never
    replaces a file, even one created a moment ago by another process."""
    func = _renameat2()
    if func is not None:
        if func(_AT_FDCWD, os.fsencode(tmp), _AT_FDCWD, os.fsencode(dest), _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code == errno.EEXIST:
            raise FileExistsError(code, os.strerror(code), str(dest))
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):  # a real failure
            raise OSError(code, os.strerror(code), str(dest))
    try:  # the file system or kernel cannot: a hard link is exclusive too
        os.link(tmp, dest)
        os.unlink(tmp)
        return
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
            raise
    # no hard links (FAT, some network file systems): reserve the name, then rename over it
    os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    os.replace(tmp, dest)


def _cause(exc: BaseException) -> OSError | None:
    """The ``OSError`` with a cannot-write errno in ``exc`` or what it was raised from."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:  # a writer wraps the system's error once or twice
        if isinstance(current, OSError) and current.errno in CANNOT_WRITE_ERRNOS:
            return current
        current = current.__cause__ or current.__context__
        seen += 1
    return None


@contextlib.contextmanager
def atomic_path(
    path: PathArg, *, force: bool = False, flag: str | None = None, force_flag: str = "--force"
) -> Iterator[Path]:
    """The temporary file to write ``path`` through; moved to ``path`` on success.

    The temporary file is in the same folder (``.<name>.<random>.tmp<suffix>``: hidden, and
    with the destination's suffix so writers that choose a format by suffix keep working). It
    is flushed to disk and moved to ``path`` when the block ends without an error: with
    ``force`` by ``os.replace``; without it the move fails (``ParameterError``, naming ``flag``)
    when ``path`` exists, so a file another process wrote meanwhile is never replaced. On any
    error (or ``KeyboardInterrupt``) the temporary file is removed and the destination is
    untouched; an error of space, quota or permission (:data:`CANNOT_WRITE_ERRNOS`), also
    when a writer wrapped it in another exception, becomes an ``ope.OutputError``.

    Parameters
    ----------
    path : str or os.PathLike
        The destination (checked before the work by :func:`check_outputs`).
    force : bool, default False
        Replace ``path`` if it exists when the work ends.
    flag : str, optional
        The flag or argument that named ``path``, for the messages (``"--out"``).
    force_flag : str, default "--force"
        How the message tells the user to allow overwriting.
    """
    dest = Path(os.fspath(path))
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp{dest.suffix}")
    try:
        yield tmp
        _fsync(tmp)
        if _STOP:  # a signal asked to stop and its exception was lost: do not publish
            raise KeyboardInterrupt
        if force:
            os.replace(tmp, dest)
        else:
            try:
                _move_noreplace(tmp, dest)
            except FileExistsError:
                head = f"argument {flag}: " if flag else ""
                raise ParameterError(
                    f"{head}{str(dest)!r} exists: another process created it while ope was "
                    f"writing it; pass {force_flag} to overwrite it (or write elsewhere)."
                ) from None
        _fsync(dest.parent if str(dest.parent) else Path("."), directory=True)
    except Exception as exc:
        cause = _cause(exc)
        if cause is None or isinstance(exc, OutputError):
            raise
        raise output_error(dest, cause, flag=flag) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
