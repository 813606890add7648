"""Files ope writes: checked before the work starts, never an input, written atomically.

One home for every writer of the command line (``ope learn --out``, ``ope import --out``, JSON
and report files) and of the Python API:

- :func:`check_outputs` is called *before* any long step (a fit, an import), so a bad
  destination fails in milliseconds, not after ten minutes of work. A destination is refused
  (``ope.ParameterError`` naming the flag or argument) when it is one of the inputs (the same
  file through a symbolic or hard link too: ``st_dev``/``st_ino`` are compared), lies inside an
  input directory (the next read of that directory would take it for logs), is a directory or a
  special file (FIFO, device), exists and ``force`` is not set, or its folder is missing or not
  writable; and when two destinations are the same file.
- :func:`atomic_path` gives the temporary file to write (in the destination's folder, so the
  rename cannot cross file systems); on success the file is flushed to disk (``fsync``) and
  renamed over the destination (``os.replace``, atomic on POSIX and Windows); on any failure the
  temporary file is removed. A crash therefore leaves either the old file or the new one, never
  a half-written one.

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
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Union

from ope.exceptions import ParameterError

__all__ = ["PathArg", "check_outputs", "atomic_path", "same_file"]

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
        raise ParameterError(
            f"{where} must end in {' or '.join(suffixes)} (the suffix chooses the format)."
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
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ParameterError(f"{where}: the folder {str(parent)!r} is not writable.")


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
        A destination is an input or inside an input directory, a directory or a special
        file, exists without ``force``, has a wrong suffix, or its folder is missing or not
        writable; or two destinations are the same file.
    """
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


@contextlib.contextmanager
def atomic_path(path: PathArg) -> Iterator[Path]:
    """The temporary file to write ``path`` through; renamed over ``path`` on success.

    The temporary file is in the same folder (``.<name>.<random>.tmp<suffix>``: hidden, and
    with the destination's suffix so writers that choose a format by suffix keep working). It
    is flushed to disk and renamed with ``os.replace`` when the block ends without an error;
    on any error (or ``KeyboardInterrupt``) it is removed and the destination is untouched.
    """
    dest = Path(os.fspath(path))
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp{dest.suffix}")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, dest)
        _fsync(dest.parent if str(dest.parent) else Path("."), directory=True)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
