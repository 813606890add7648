"""Reading logs: parquet files, directories and datasets, DataFrames and Arrow tables.

Eager readers return validated containers (:func:`read_logs` -> ``BanditLogs``,
:func:`read_trajectories` -> ``Trajectories``, :func:`read_paired` -> ``PairedReplays``);
:func:`scan_logs` returns a lazy :class:`LogScan` that yields validated ``BanditLogs`` batches in
bounded memory. Every reader

1. resolves the user's ``mapping`` and checks names and types against the schema *before*
   reading data (one ``SchemaError`` listing every problem),
2. reads only the needed columns (a parquet projection),
3. casts to canonical types without loss and applies the row rules of :mod:`ope.schema`,
4. counts rejected rows by reason in a :class:`~ope.logs.ValidationReport`, then raises
   ``ValidationError`` (``on_invalid="raise"``, the default) or drops them with a
   ``DroppedRowsWarning`` (``on_invalid="drop"``).

Row numbers in reports are 0-based positions in the source (for a directory: files in sorted
path order, rows in file order).

Every input path (logs, policy tables, importer inputs) goes through :func:`locate_input`: it
is stat-ed before anything opens it, only regular files are read (a FIFO or device given as
the path is refused at once, one inside a directory is skipped and named in the report),
symbolic links are followed but never into a file or folder already read, an empty path is a
``ParameterError``, and URIs other than ``file://`` go through ``pyarrow.fs``.
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import os
import re
import stat
import sys
from dataclasses import dataclass, replace
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ope._dedup import SeenIds, mark_repeats
from ope._progress import enabled as progress_enabled
from ope._progress import progress
from ope._provenance import PROVENANCE_PREFIX, propensity_metadata
from ope._validation import check_choice, check_positive_int, describe, repeated_names
from ope.exceptions import DataFileError, ParameterError, SchemaError, ValidationError
from ope.logs import BanditLogs, PairedReplays, SkippedPath, Trajectories, ValidationReport
from ope.schema import (
    BANDIT,
    PAIRED,
    TRAJECTORY,
    ColumnPlan,
    LogSchema,
    check_bandit_rows,
    check_paired_rows,
    check_trajectory_rows,
    column_problem,
    conform,
    id_type_of,
    plan_columns,
)

__all__ = [
    "read_logs",
    "scan_logs",
    "read_trajectories",
    "read_paired",
    "LogScan",
    "ACTION_FEATURES_KEY",
    "with_action_features",
    "embedded_action_features",
    "locate_input",
    "check_regular_file",
    "check_parquet_file",
    "check_on_invalid",
]

#: Default rows per batch of :func:`scan_logs`: about 10 MB per float64 column, large enough
#: to amortise per-batch overhead and small enough to keep several columns in cache-friendly,
#: bounded memory.
DEFAULT_BATCH_SIZE: Final[int] = 262_144

_PARQUET_MAGIC: Final[bytes] = b"PAR1"
#: The values of ``on_invalid`` every reader accepts.
ON_INVALID: Final = ("raise", "drop")

OnInvalid = Literal["raise", "drop"]
Source = Any  # str | os.PathLike | pandas.DataFrame | pyarrow.Table | pyarrow.dataset.Dataset


# --------------------------------------------------------------------------------------------
# paths: the one place that lists and opens input paths (logs, policy tables, importer inputs)
# --------------------------------------------------------------------------------------------

#: Why an entry of a logs directory was left out (:class:`~ope.logs.SkippedPath` ``reason``):
#: the same file or folder reached a second time (through a symbolic link, or a hard link), and
#: an entry that is not a regular file (a FIFO, a socket, a device), which cannot hold parquet.
SKIP_REASONS: Final[Mapping[str, str]] = {
    "already_read": "the same file or folder was already read (through another path or link)",
    "not_regular_file": "not a regular file (a FIFO, socket or device cannot hold parquet)",
}

#: URI schemes served by ``pyarrow.fs.FileSystem.from_uri`` and what a machine needs for each.
URI_REQUIREMENTS: Final[Mapping[str, str]] = {
    "s3": "pyarrow's S3 filesystem (in the pyarrow wheels from PyPI; a conda pyarrow needs "
          "libarrow built with S3) and AWS credentials (AWS_* variables or ~/.aws)",
    "gs": "pyarrow's GCS filesystem (in the pyarrow wheels from PyPI) and Google credentials",
    "gcs": "pyarrow's GCS filesystem (in the pyarrow wheels from PyPI) and Google credentials",
    "hdfs": "a Java runtime and Hadoop's libhdfs (set JAVA_HOME, HADOOP_HOME and "
            "CLASSPATH=$(hadoop classpath --glob)); see pyarrow.fs.HadoopFileSystem",
    "viewfs": "a Java runtime and Hadoop's libhdfs (set JAVA_HOME, HADOOP_HOME and "
              "CLASSPATH=$(hadoop classpath --glob)); see pyarrow.fs.HadoopFileSystem",
    "abfs": "pyarrow's Azure filesystem (pyarrow >= 16 wheels from PyPI) and Azure credentials",
    "abfss": "pyarrow's Azure filesystem (pyarrow >= 16 wheels from PyPI) and Azure credentials",
}

_URI: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

#: Seconds within which a remote store (``s3://``, ``gs://``, ...) must answer ope's first
#: look at a URI (opening the filesystem and stating the path), or ope reports it unreachable:
#: a wrong bucket name or a machine without network fails in this bound, never a hang.
REMOTE_TIMEOUT_SECONDS: Final = 30.0

#: Seconds a cloud store's client may spend retrying one request before it gives up. Retries
#: absorb brief outages; GCS's own default (15 minutes) makes a wrong bucket name or a machine
#: without network look like a hang. Below :data:`REMOTE_TIMEOUT_SECONDS`, so the client itself
#: has usually given up when the bound is reached.
REMOTE_RETRY_SECONDS: Final = 20.0

#: Seconds an S3 client waits for a TCP connection (the SDK's default waits far longer on an
#: address that drops packets) and for a response, and how many attempts it makes per request:
#: stating a key takes at most two requests, so 2 x 2 x 5 s stays under the bound.
REMOTE_CONNECT_SECONDS: Final = 5.0
REMOTE_REQUEST_SECONDS: Final = 10.0
REMOTE_ATTEMPTS: Final = 2

#: Fallbacks when the system does not say (``os.pathconf``): Linux's PATH_MAX and the NAME_MAX
#: of ext4, xfs, btrfs, apfs and ntfs.
_PATH_MAX_FALLBACK: Final = 4096
_NAME_MAX_FALLBACK: Final = 255


@dataclass(frozen=True)
class Located:
    """An input path resolved by :func:`locate_input`: what it is and which files to read.

    Attributes
    ----------
    name : str
        The path or URI as the user gave it (for messages and reports).
    path : str
        The path on ``filesystem`` (a local path for local files and ``file://`` URIs).
    filesystem : pyarrow.fs.FileSystem or None
        The remote filesystem of a URI (None for local paths).
    is_dir : bool
        Whether the path is a directory (its data files are ``files``).
    files : tuple of str
        The regular files to read, in sorted path order (one for a file).
    skipped : tuple of SkippedPath
        Entries of a directory left out, each with its reason (:data:`SKIP_REASONS`).
    """

    name: str
    path: str
    filesystem: Any = None
    is_dir: bool = False
    files: tuple[str, ...] = ()
    skipped: tuple[SkippedPath, ...] = ()


def _kind_of_mode(mode: int) -> str:
    """What a non-regular, non-directory file is, for messages."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a special file"


def _name_limits(path: str) -> tuple[int, int]:
    """(longest path, longest component) in bytes that the filesystem at ``path`` accepts."""
    probe = next((p for p in [Path(path).parent, *Path(path).parents] if _exists(p)), Path("/"))
    try:
        return int(os.pathconf(probe, "PC_PATH_MAX")), int(os.pathconf(probe, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):  # not POSIX, or the system does not say
        return _PATH_MAX_FALLBACK, _NAME_MAX_FALLBACK


def _exists(p: Path) -> bool:
    try:
        return p.exists()
    except OSError:
        return False


def _too_long(path: str, what: str) -> DataFileError:
    """ENAMETOOLONG as a message with the path's lengths and the system's limits."""
    longest = max((len(os.fsencode(part)) for part in Path(path).parts), default=0)
    total = len(os.fsencode(path))
    path_max, name_max = _name_limits(path)
    shown = path if len(path) <= 120 else f"{path[:60]}...{path[-40:]}"
    if longest > name_max:
        why = (f"one of its components is {longest:,} bytes long and this filesystem allows "
               f"{name_max:,} per file or folder name")
    else:
        why = f"it is {total:,} bytes long and this system allows {path_max:,}"
    return DataFileError(
        f"{what} path {shown!r} ({len(path):,} characters) is too long: {why} (ENAMETOOLONG). "
        "Check how the path was built (a value pasted twice, a list joined into one name), or "
        "move the data to a shorter path"
    )


def _os_error(exc: OSError, path: str, what: str) -> DataFileError:
    """An OSError from listing or opening ``path`` as a DataFileError that says what happened."""
    if exc.errno == errno.ENAMETOOLONG:
        return _too_long(path, what)
    if exc.errno == errno.ELOOP:
        return DataFileError(
            f"{what} path {path} is a loop of symbolic links (ELOOP): following it never reaches "
            "a file or folder. Remove or fix the link (ls -l shows where each one points)"
        )
    if exc.errno == errno.ENOENT:
        return DataFileError(
            f"{what} path {path} does not exist; check the path (cwd is {Path.cwd()})"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return DataFileError(f"cannot read {what} path {path}: permission denied")
    if exc.errno == errno.ENOTDIR:
        return DataFileError(
            f"{what} path {path} goes through a file as if it were a folder (ENOTDIR); check "
            "the path"
        )
    return DataFileError(f"cannot read {what} path {path}: {exc.strerror or exc}")


def _stat_local(path: str, what: str) -> os.stat_result:
    """``os.stat`` (following links) with every failure turned into a DataFileError."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        try:
            target = os.readlink(path)
        except OSError:
            target = None
        if target is not None:  # the link exists, its target does not
            raise DataFileError(
                f"{what} path {path} is a symbolic link to {target}, which does not exist (a "
                "dangling link); restore its target or remove the link"
            ) from None
        raise _os_error(FileNotFoundError(errno.ENOENT, "missing"), path, what) from None
    except ValueError:  # an embedded NUL byte
        raise ParameterError(f"{what} path {path!r} contains a NUL character") from None
    except OSError as exc:
        raise _os_error(exc, path, what) from None


def _walk_local(root: str, what: str) -> tuple[list[str], list[SkippedPath]]:
    """The regular data files under a local directory, each real file once.

    Names starting with ``.`` or ``_`` are bookkeeping (``_SUCCESS``, ``.crc``, ``_temporary``)
    and are not looked at. The real tree is walked first; symbolic links are followed
    afterwards, one at a time, and never into a folder or file already read (dedupe by
    ``(st_dev, st_ino)``), so a link to the directory itself, to one of its partitions or to a
    file already listed adds nothing (it is recorded as ``already_read``). A FIFO, socket or
    device is recorded as ``not_regular_file`` and never opened. A dangling link or a link loop
    is an error: the rows it should lead to cannot be read.
    """
    root_stat = _stat_local(root, what)
    seen_dirs = {(root_stat.st_dev, root_stat.st_ino)}
    seen_files: dict[tuple[int, int], str] = {}
    files: list[str] = []
    skipped: list[SkippedPath] = []
    links: list[str] = []

    def add_file(path: str, st: os.stat_result, via: str | None) -> None:
        key = (st.st_dev, st.st_ino)
        if key in seen_files:
            detail = f"the same file as {seen_files[key]}" if via is None else (
                f"a link to {via}, the same file as {seen_files[key]}")
            skipped.append(SkippedPath(path, "already_read", detail))
            return
        seen_files[key] = path
        files.append(path)

    def scan(directory: str) -> None:
        stack = [directory]
        while stack:  # a loop over folders, not rows
            d = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as exc:
                raise _os_error(exc, d, what) from None
            subdirs = []
            for entry in entries:
                if entry.name.startswith((".", "_")):
                    continue
                try:
                    if entry.is_symlink():
                        links.append(entry.path)
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    raise _os_error(exc, entry.path, what) from None
                if stat.S_ISDIR(st.st_mode):
                    key = (st.st_dev, st.st_ino)
                    if key in seen_dirs:  # a bind mount of a folder already read
                        skipped.append(SkippedPath(entry.path, "already_read",
                                                   "a folder already read"))
                        continue
                    seen_dirs.add(key)
                    subdirs.append(entry.path)
                elif stat.S_ISREG(st.st_mode):
                    add_file(entry.path, st, None)
                else:
                    skipped.append(SkippedPath(entry.path, "not_regular_file",
                                               _kind_of_mode(st.st_mode)))
            stack.extend(reversed(subdirs))

    scan(root)
    while links:  # links last, so that a file is listed under its real path when it has one
        link = links.pop(0)
        target = os.readlink(link)
        st = _stat_local(link, what)
        key = (st.st_dev, st.st_ino)
        if stat.S_ISDIR(st.st_mode):
            if key in seen_dirs:
                skipped.append(SkippedPath(link, "already_read",
                                           f"a link to {target}, a folder already read"))
                continue
            seen_dirs.add(key)
            scan(link)
        elif stat.S_ISREG(st.st_mode):
            add_file(link, st, target)
        else:
            skipped.append(SkippedPath(link, "not_regular_file",
                                       f"a link to {target}, {_kind_of_mode(st.st_mode)}"))
    return sorted(files), sorted(skipped, key=lambda s: s.path)


def _walk_remote(fs: Any, root: str, name: str) -> list[str]:
    """The data files under a directory of a remote filesystem (no links there), sorted."""
    try:
        infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    except (pa.ArrowException, OSError) as exc:
        raise DataFileError(f"cannot list {name}: {exc}") from None
    files = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(root):].lstrip("/") if info.path.startswith(root) else info.path
        if any(part.startswith((".", "_")) for part in rel.split("/")):
            continue
        files.append(info.path)
    return sorted(files)


def filesystem_from_uri(uri: str, *, what: str = "logs") -> tuple[Any, str]:
    """``pyarrow.fs.FileSystem.from_uri`` with a message that names the scheme and the fix.

    A ``gs://`` URI without its own ``retry_limit_seconds`` gets
    :data:`REMOTE_RETRY_SECONDS` (GCS retries an unreachable store for 15 minutes by default,
    which looks like a hang); an S3 filesystem gets :data:`REMOTE_CONNECT_SECONDS`,
    :data:`REMOTE_REQUEST_SECONDS` and :data:`REMOTE_ATTEMPTS` unless it set its own timeouts.
    """
    m = _URI.match(uri)
    scheme = m.group(1) if m is not None else ""
    request = uri
    if scheme.lower() in ("gs", "gcs") and "retry_limit_seconds=" not in uri:
        request += ("&" if "?" in uri else "?") + f"retry_limit_seconds={REMOTE_RETRY_SECONDS:g}"
    need = URI_REQUIREMENTS.get(scheme.lower())
    try:
        fs, path = pafs.FileSystem.from_uri(request)
        if isinstance(fs, getattr(pafs, "S3FileSystem", ())):
            fs = _bounded_s3(fs)
        return fs, path
    except (pa.ArrowException, OSError, ValueError) as exc:
        text = str(exc)
        if "Unrecognized filesystem type" in text or need is None:
            raise DataFileError(
                f"cannot read {what} {uri}: ope reads local paths, file:// URIs and the URIs "
                f"that pyarrow.fs serves ({', '.join(s + '://' for s in URI_REQUIREMENTS)}); "
                f"{scheme}:// is not one of them. Download the file first"
            ) from None
        unavailable = any(s in text.lower() for s in (
            "not enabled", "support", "libjvm", "libhdfs", "java", "not implemented",
            "unable to load"))
        if unavailable:
            raise DataFileError(
                f"cannot read {what} {uri}: the {scheme}:// filesystem is not available on this "
                f"machine ({text.splitlines()[0]}). It needs {need}"
            ) from None
        raise DataFileError(
            f"cannot reach {what} {uri}: {text.splitlines()[0] if text else type(exc).__name__}. "
            f"The {scheme}:// filesystem needs {need}; check the bucket/host name and the network"
        ) from None


def _bounded_s3(fs: Any) -> Any:
    """The S3 filesystem ``fs`` with connect and request timeouts and few attempts."""
    try:
        rebuild, (options,) = fs.__reduce__()
    except (TypeError, ValueError):  # a pyarrow that does not pickle it so: as it is
        return fs
    if options.get("connect_timeout", -1) > 0 or options.get("request_timeout", -1) > 0:
        return fs  # the caller chose
    options = {**options, "connect_timeout": REMOTE_CONNECT_SECONDS,
               "request_timeout": REMOTE_REQUEST_SECONDS,
               "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=REMOTE_ATTEMPTS)}
    try:
        return rebuild(options)
    except TypeError:  # an older pyarrow without some option
        return fs


def _within(seconds: float, call: Callable[[], Any], uri: str, what: str) -> Any:
    """``call()`` (a remote store's first answer), or a ``DataFileError`` when it has not
    returned after ``seconds``: run in a daemon thread, left to the client's own timeouts."""
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name=f"ope-remote-{what}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        m = _URI.match(uri)
        scheme = m.group(1) if m is not None else "remote"
        raise DataFileError(
            f"cannot reach {what} {uri}: no answer within {seconds:g} s (the network, the "
            f"bucket/host name or the endpoint). The {scheme}:// filesystem needs "
            f"{URI_REQUIREMENTS.get(scheme.lower(), 'network access')}")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _stat_remote(raw: str, what: str) -> tuple[Any, str, Any]:
    """(filesystem, path, file info) of a remote URI; a ``DataFileError`` when unreachable."""
    fs, path = filesystem_from_uri(raw, what=what)
    try:
        return fs, path, fs.get_file_info(path)
    except (pa.ArrowException, OSError) as exc:
        scheme = raw.split("://", 1)[0]
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataFileError(
            f"cannot reach {what} {raw}: {first[:300]}. The {scheme}:// filesystem needs "
            f"{URI_REQUIREMENTS.get(scheme.lower(), 'network access')}; check the "
            "bucket/host name, the credentials and the network"
        ) from None


def locate_input(source: str | os.PathLike[str], *, what: str = "logs",
                 directories: bool = True, argument: str | None = None) -> Located:
    """Resolve an input path or URI: stat it before anything opens it, list a directory's files.

    The one policy for every path ope reads (logs, policy tables, importer inputs):

    - an empty path is a ``ParameterError`` (it would otherwise mean the current directory);
    - ``file://`` URIs are local paths; other URIs (``s3://``, ``gs://``, ``hdfs://``,
      ``abfs://``) go through ``pyarrow.fs.FileSystem.from_uri``; a scheme it does not serve,
      or one whose filesystem this machine lacks, is a ``DataFileError`` naming the scheme and
      what to install; a store that has not answered after :data:`REMOTE_TIMEOUT_SECONDS` is
      a ``DataFileError`` ("cannot reach ...: no answer within 30 s");
    - only regular files are read: a FIFO, socket or device given as the path is refused at
      once (it is never opened, so nothing blocks); inside a directory such entries are skipped
      and named in the report (``not_regular_file``);
    - symbolic links are followed, but never into a file or folder already read (dedupe by
      device and inode): a link to the directory itself or to a partition is skipped and named
      (``already_read``); a dangling link or a link loop is an error naming the link;
    - a path or component longer than the system allows is a ``DataFileError`` giving its
      length (never a raw ``OSError``).

    Parameters
    ----------
    source : str or os.PathLike
        A path or URI.
    what : str, default "logs"
        What the path holds, for messages ("policy table", "DSJSON file", ...).
    directories : bool, default True
        Whether a directory is accepted (its data files are listed).
    argument : str, optional
        The caller's argument that holds the path (``"source"``, ``"src"``, ...): a path that is
        not one (not a str or os.PathLike, empty, a NUL byte) is an error naming it.

    Returns
    -------
    Located

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name in ("b.parquet", "a.parquet", "_SUCCESS"):
    ...     open(os.path.join(d, name), "wb").close()
    >>> os.symlink(d, os.path.join(d, "again"))
    >>> found = locate_input(d)
    >>> [os.path.basename(f) for f in found.files], [s.reason for s in found.skipped]
    (['a.parquet', 'b.parquet'], ['already_read'])
    >>> locate_input("")
    Traceback (most recent call last):
    ...
    ope.exceptions.ParameterError: the logs path is empty; give a file, a directory or a URI
    """
    named = f"`{argument}`: " if argument else ""
    try:
        raw = os.fspath(source)
    except TypeError:  # an int would be read as a file descriptor by open(), a list fails
        raise ParameterError(
            f"{named}the {what} path must be a str or os.PathLike (a file, a directory or a "
            f"URI); got {describe(source)}"
        ) from None
    if not isinstance(raw, str):
        raise ParameterError(
            f"{named}{what} path must be a str or os.PathLike of str, got bytes {raw!r}")
    if not raw.strip():
        raise ParameterError(f"{named}the {what} path is empty; give a file, a directory or a URI")
    if "\x00" in raw:
        raise ParameterError(f"{named}{what} path {raw!r} contains a NUL character")
    m = _URI.match(raw)
    if m is not None and m.group(1).lower() != "file":
        fs, path, info = _within(REMOTE_TIMEOUT_SECONDS, lambda: _stat_remote(raw, what),
                                 raw, what)
        if info.type == pafs.FileType.NotFound:
            raise DataFileError(f"{what} {raw} does not exist; check the URI")
        if info.type == pafs.FileType.Directory:
            if not directories:
                raise DataFileError(f"{what} {raw} is a directory; give one file")
            return Located(raw, path, fs, True, tuple(_walk_remote(fs, path, raw)))
        return Located(raw, path, fs, False, (path,))
    if m is not None:  # file:// -> a local path (percent-decoded); other hosts are refused
        try:
            _, path = pafs.FileSystem.from_uri(raw)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise DataFileError(f"cannot read {what} {raw}: {exc}") from None
    else:
        path = raw
    st = _stat_local(path, what)
    if stat.S_ISDIR(st.st_mode):
        if not directories:
            raise DataFileError(f"{what} path {path} is a directory; give one file")
        files, skipped = _walk_local(path, what)
        return Located(raw if m is None else path, path, None, True, tuple(files), tuple(skipped))
    if not stat.S_ISREG(st.st_mode):
        raise DataFileError(
            f"{what} path {path} is {_kind_of_mode(st.st_mode)}, not a regular file; ope reads "
            "only regular files (a parquet footer sits at the end of the file, and reading a "
            "stream could block forever). Write the data to a file first"
        )
    return Located(raw if m is None else path, path, None, False, (path,))


def check_regular_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` when it is a regular local file (links followed); else a DataFileError.

    For inputs found by name inside a folder (an OBD campaign's ``item_context.csv``), which
    must be checked before they are opened, as :func:`locate_input` checks the path given.
    """
    p = os.fspath(path)
    st = _stat_local(p, what)
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else _kind_of_mode(st.st_mode)
        raise DataFileError(f"{what} {p} is {kind}, not a regular file")
    return Path(p)


# --------------------------------------------------------------------------------------------
# sources
# --------------------------------------------------------------------------------------------


def check_parquet_file(path: str, *, fs: Any = None, in_directory: bool = False,
                       what: str = "logs") -> None:
    """Raise a DataFileError unless ``path`` (local, or on the filesystem ``fs``) looks like a
    complete parquet file: the magic bytes at both ends, at least 12 bytes."""
    parent = str(Path(path).parent) if fs is None else path.rsplit("/", 1)[0]
    stray = (
        f". If it is not part of the {what}, move it out of the directory {parent} (files "
        "and folders whose names start with '.' or '_', such as _SUCCESS or .crc files, are "
        "ignored)"
        if in_directory
        else ""
    )
    try:
        if fs is None:
            size = os.stat(path).st_size
            fh: Any = open(path, "rb")  # noqa: SIM115 - closed below
        else:
            fh = fs.open_input_file(path)
            size = fh.size()
        with fh:
            head = fh.read(4)
            if size >= 8:
                fh.seek(size - 4)
            tail = fh.read(4)
    except (OSError, pa.ArrowException) as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise _os_error(exc, path, what) from None
        raise DataFileError(f"cannot read {path}: {exc}") from None
    if size == 0:
        raise DataFileError(
            f"{path} is empty (0 bytes), not a parquet file; was the write interrupted?" + stray
        )
    if head != _PARQUET_MAGIC:
        raise DataFileError(
            f"{path} is not a parquet file (it does not start with the parquet magic bytes "
            f"'PAR1' but with {head!r}). ope reads parquet; Vowpal Wabbit DSJSON and Open Bandit "
            "Dataset folders have their importers (ope.read_dsjson / ope.read_obd, on the command "
            "line --format dsjson|obd or ope import); convert other CSV/JSON first, e.g. "
            "pandas.read_csv(path).to_parquet('logs.parquet'), or pass a DataFrame" + stray
        )
    if size < 12 or tail != _PARQUET_MAGIC:
        raise DataFileError(
            f"{path} is a truncated parquet file (it has no parquet footer; {size:,} bytes). "
            "It was probably cut short while being written or copied; rewrite or re-copy it"
            + stray
        )


@dataclass(frozen=True)
class _RangeIndex:
    """A named pandas RangeIndex kept only in a parquet file's metadata."""

    name: str
    start: int
    step: int
    stop: int | None

    def problem(self, n_rows: int) -> str | None:
        """Why serving this index as a column of ``n_rows`` rows would be wrong (None if not)."""
        if self.step == 0:
            return "with step 0, which pandas never writes (every id would be the same)"
        if self.stop is not None and len(range(self.start, self.stop, self.step)) != n_rows:
            return (
                f"of {len(range(self.start, self.stop, self.step)):,} rows, but the file holds "
                f"{n_rows:,} (the metadata is stale: the file was changed after pandas wrote it)"
            )
        last = self.start + self.step * max(n_rows - 1, 0)  # exact: Python integers
        for end in (self.start, last):
            if not -(2**63) <= end <= 2**63 - 1:
                return (
                    f"whose values leave int64 (its row {n_rows - 1 if end == last else 0:,} "
                    f"would be {end:,}), so they would wrap around into wrong ids"
                )
        return None

    def values(self, offset: int, count: int) -> pa.Array:
        return pa.array(self.start + self.step * np.arange(offset, offset + count, dtype=np.int64))


class _Opened:
    """A source resolved to a name, an Arrow schema, and ways to read it."""

    def __init__(
        self, name: str, dataset: ds.Dataset | None, table: pa.Table | None,
        file: str | None = None,
        file_schemas: dict[str, pa.Schema] | None = None,
        *,
        filesystem: Any = None,
        required: Sequence[str] = (),
        files: int | None = None,
        skipped: Sequence[SkippedPath] = (),
    ) -> None:
        self.name = name
        # exactly one of the two is set; pyarrow is untyped, so the dataset's methods are Any
        self.dataset: Any = dataset
        self.table = table
        self.file = file
        self.filesystem = filesystem
        self.file_schemas = file_schemas or {}
        self.files = files
        self.skipped = tuple(skipped)
        self.reopen: Any = None  # schema -> dataset, for directories
        # a named pandas RangeIndex that the file keeps only in its metadata: it is served as
        # an int64 column, unless it would stand in for a required column (metadata never
        # supplies one); ``hints`` says why such a column is missing
        self.range_index: _RangeIndex | None = None
        self.hints: dict[str, str] = {}
        if file is not None and dataset is not None:
            index = _pandas_range_index(dataset.schema)
            if index is not None and index.name in required:
                self.hints[index.name] = (
                    f"; {name}'s pandas metadata names its index {index.name!r} (a RangeIndex "
                    "kept only as metadata, not a column), and ope never takes a required "
                    "column from metadata: write it as a column, e.g. "
                    "df.reset_index().to_parquet(path)"
                )
            else:
                self.range_index = index

    def reconcile(self, plan: ColumnPlan, log_schema: LogSchema) -> None:
        """Check the planned columns in every file of a directory; read them in one type.

        A dataset takes its schema from one file and casts the others to it on read, which
        could parse strings into numbers or narrow float64 to float32 silently. Instead, every
        file must hold every planned column that ope knows (``action``, ``event_id``,
        ``target__<name>``, ...) in a type ope accepts, and each column is read in the widest
        type of its files. A pass-through column (a segment, an extra outcome) that only some
        files have is read as null in the others: schemas grow over time.

        A RangeIndex served from a file's pandas metadata is checked here too, when it is
        planned: it must describe exactly the file's rows, within int64.
        """
        index = self.range_index
        if index is not None and index.name in plan.source_columns:
            problem = index.problem(self.count_rows())
            if problem is not None:
                raise SchemaError(
                    f"{self.name}: its pandas metadata describes the index {index.name!r} as "
                    f"RangeIndex(start={index.start}, stop={index.stop}, step={index.step}) "
                    f"{problem}. ope reads such an index as the column {index.name!r} and "
                    "cannot do so faithfully: write the index as a column "
                    "(df.reset_index().to_parquet(path)), or drop it (df.reset_index(drop=True))"
                )
        if len(self.file_schemas) < 2:
            return
        partition_fields = set(self.dataset.schema.names) - {
            n for s in self.file_schemas.values() for n in s.names
        }
        problems: list[str] = []
        fields = []
        for name in self.dataset.schema.names:
            if name not in plan.source_columns or name in partition_fields:
                fields.append(self.dataset.schema.field(name))
                continue
            ours = plan.renames[name]
            kind = plan.kinds.get(ours)
            types: dict[str, pa.DataType] = {}
            missing = []
            for path, schema in self.file_schemas.items():
                if name in schema.names:
                    types[path] = schema.field(name).type
                else:
                    missing.append(path)
            if missing and kind is not None:
                problems.append(
                    f"column {name!r} is missing from {len(missing)} of {len(self.file_schemas)} "
                    f"files (e.g. {missing[0]}); add it to every file"
                    + ("" if ours in log_schema.required else
                       f", or leave {ours!r} out of columns=[...] to read the others")
                )
            if kind is not None:
                for path, t in types.items():
                    problem = column_problem(t, kind, plan.id_types.get("action"))
                    if problem is None and kind == "int64 or string" and id_type_of(t) != plan.id_types[ours]:
                        problem = f"has type {t} but {plan.id_types[ours]} in other files"
                    if problem is not None:
                        problems.append(f"column {name!r} in {path} {problem}")
                        break
            try:
                unified = pa.unify_schemas(
                    [pa.schema([pa.field(name, t)]) for t in dict.fromkeys(types.values())],
                    promote_options="permissive",
                )
                fields.append(unified.field(name))
            except (pa.ArrowException, TypeError) as exc:
                if kind is None:
                    problems.append(f"column {name!r} has incompatible types across files ({exc})")
                fields.append(self.dataset.schema.field(name))
        if problems:
            raise SchemaError(
                f"the files of {self.name} disagree on their columns:\n  - "
                + "\n  - ".join(problems)
            )
        schema = pa.schema(fields)
        if not schema.equals(self.dataset.schema):
            self.dataset = self.reopen(schema)

    @property
    def schema(self) -> pa.Schema:
        if self.table is not None:
            return self.table.schema
        if self.range_index is not None:
            return self.dataset.schema.append(pa.field(self.range_index.name, pa.int64()))
        return self.dataset.schema

    @property
    def provenance(self) -> dict[bytes, bytes]:
        """The source's propensity provenance (``ope.propensity_*`` schema metadata) that the
        validated tables carry on: estimated propensities stay estimated after a round trip."""
        return propensity_metadata(list(self.file_schemas.values()) or self.schema)

    def count_rows(self) -> int:
        """Rows in the source before validation (from parquet footers; reads no data)."""
        if self.table is not None:
            return int(self.table.num_rows)
        try:
            return int(self.dataset.count_rows())
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"cannot read {self.name}: {exc}") from None

    def _physical(self, columns: Sequence[str]) -> list[str]:
        index = self.range_index.name if self.range_index is not None else None
        return [c for c in columns if c != index]

    def _with_index(self, part: pa.Table | pa.RecordBatch, columns: Sequence[str], offset: int) -> Any:
        """Insert the RangeIndex column (rows ``offset ...``) where ``columns`` puts it."""
        if self.range_index is None or self.range_index.name not in columns:
            return part
        name = self.range_index.name
        at = list(columns).index(name)
        values = self.range_index.values(offset, part.num_rows)
        arrays = list(part.columns)
        names = list(part.schema.names)
        arrays.insert(at, values)
        names.insert(at, name)
        cls = pa.RecordBatch if isinstance(part, pa.RecordBatch) else pa.Table
        return cls.from_arrays(arrays, names=names)

    def read(self, columns: Sequence[str]) -> pa.Table:
        if self.table is not None:
            return self.table.select(list(columns))
        physical = self._physical(columns)
        try:
            if progress_enabled() and (self.files or 1) > 1:
                # many files: read batch by batch with a bar (the same rows, in the same order)
                total = self.count_rows()
                parts = []
                with progress(desc=f"read {self.name}", total=total, unit="row") as bar:
                    for batch in self.dataset.to_batches(columns=physical):
                        parts.append(batch)
                        bar.update(batch.num_rows)
                table = (pa.Table.from_batches(parts) if parts
                         else self.dataset.to_table(columns=physical))
            else:
                table = self.dataset.to_table(columns=physical)
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"cannot read {self.name}: {exc}") from None
        return self._with_index(table, columns, 0)

    def batches(self, columns: Sequence[str], batch_size: int) -> Iterator[pa.RecordBatch]:
        if self.table is not None:
            yield from self.table.select(list(columns)).to_batches(max_chunksize=batch_size)
            return
        try:
            if self.file is not None:
                # a single file: read row group by row group without read-ahead, which keeps
                # the peak memory at about one row group (Dataset.to_batches buffers ahead)
                reader = pq.ParquetFile(self.file, filesystem=self.filesystem)
                offset = 0
                for batch in reader.iter_batches(columns=self._physical(columns),
                                                 batch_size=batch_size):
                    yield self._with_index(batch, columns, offset)
                    offset += batch.num_rows
            else:
                yield from self.dataset.to_batches(
                    columns=list(columns), batch_size=batch_size, batch_readahead=1,
                    fragment_readahead=1,
                )
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"cannot read {self.name}: {exc}") from None


def _pandas_range_index(schema: pa.Schema) -> _RangeIndex | None:
    """A named pandas RangeIndex stored only as file metadata (None when there is none).

    ``DataFrame.to_parquet`` writes a RangeIndex (which pandas also infers for ids such as
    0, 1, 2, ... after ``set_index("event_id")``) as three numbers in the metadata, not as a
    column; reading the columns alone would lose it. Metadata that does not parse is ignored:
    it is only metadata, and the real columns are read as they are.
    """
    meta = schema.metadata or {}
    raw = meta.get(b"pandas")
    if raw is None:
        return None
    try:
        index_columns = json.loads(raw).get("index_columns", [])
    except (ValueError, AttributeError):
        return None
    if not isinstance(index_columns, list) or len(index_columns) != 1 \
            or not isinstance(index_columns[0], dict):
        return None
    info = index_columns[0]
    name = info.get("name")
    if info.get("kind") != "range" or not isinstance(name, str) or name in schema.names:
        return None
    try:
        start, step = int(info.get("start", 0)), int(info.get("step", 1))
        stop = info.get("stop")
        stop = None if stop is None else int(stop)
    except (TypeError, ValueError, OverflowError):
        return None
    return _RangeIndex(name, start, step, stop)


def _from_pandas(df: Any) -> pa.Table:
    names = [str(c) for c in df.columns]
    repeated = repeated_names(names)
    if repeated:
        raise SchemaError(
            f"the DataFrame has {len(names) - len(set(names))} repeated column name(s): "
            f"{', '.join(map(repr, repeated))} appear more than once (as strings; pandas allows "
            "it, Arrow and ope do not). Rename or drop the repeats, e.g. "
            "df.loc[:, ~df.columns.duplicated()]"
        )
    try:
        table = pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError):
        table = None
    if table is not None:
        # a named index (df.set_index("event_id")) is data; an unnamed one is row labels
        for level, name in reversed(list(enumerate(df.index.names))):
            if name is not None:
                values = pa.array(df.index.get_level_values(level), from_pandas=True)
                table = table.add_column(0, str(name), values)
        return table
    problems = []
    for name in df.columns:
        try:
            pa.array(df[name], from_pandas=True)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            kinds = sorted({type(v).__name__ for v in df[name].head(10_000)})
            problems.append(
                f"column {str(name)!r} holds Python objects of mixed types ({', '.join(kinds)}) "
                f"that Arrow cannot store in one column ({exc})"
            )
    raise SchemaError(
        "the DataFrame cannot be converted to Arrow:\n  - " + "\n  - ".join(problems)
        + "\nConvert each column to one type (e.g. pandas.to_numeric or .astype(str))"
    )


def _open_directory(found: Located) -> _Opened:
    files = list(found.files)
    fs = found.filesystem
    path = found.path
    if not files:
        raise DataFileError(
            f"{found.name} is a directory without parquet files (files whose names start "
            "with '.' or '_' are ignored)"
            + (f"; skipped: {'; '.join(s.text() for s in found.skipped)}" if found.skipped else "")
        )
    for f in files:
        check_parquet_file(f, fs=fs, in_directory=True)
    partitioning = ds.partitioning(flavor="hive")
    try:
        dataset = ds.dataset(files, format="parquet", partitioning=partitioning,
                             partition_base_dir=path, filesystem=fs)
    except (pa.ArrowException, OSError) as exc:
        raise (_repeated_name_error(found) or DataFileError(
            f"cannot open the parquet files in {found.name}: {exc}")) from None
    file_schemas = {}
    for fragment in dataset.get_fragments():
        try:
            file_schemas[fragment.path] = fragment.physical_schema
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(
                f"{fragment.path} is not a readable parquet file: {exc}"
            ) from None

    def reopen(schema: pa.Schema) -> ds.Dataset:
        return ds.dataset(files, schema=schema, format="parquet", partitioning=partitioning,
                          partition_base_dir=path, filesystem=fs)

    # every column of every file (a dataset's schema is its first file's): a column that only
    # later files have is read too, instead of being left out without a word
    try:
        union = pa.unify_schemas([dataset.schema, *file_schemas.values()],
                                 promote_options="permissive")
    except (pa.ArrowException, TypeError):
        union = None  # reconcile() names the column whose types disagree
    if union is not None and not union.equals(dataset.schema):
        try:
            dataset = reopen(union)
        except (pa.ArrowException, OSError) as exc:
            raise DataFileError(f"cannot open the parquet files in {found.name}: {exc}") from None
    opened = _Opened(found.name, dataset, None, file_schemas=file_schemas, filesystem=fs,
                     files=len(files), skipped=found.skipped)
    opened.reopen = reopen
    return opened


def _repeated_name_error(found: Located) -> SchemaError | None:
    """The SchemaError naming the repeated column names of a parquet file (Arrow cannot open a
    dataset with them and says only "duplicate field names"); None when there are none."""
    for f in found.files:  # a loop over files
        try:
            names = pq.read_schema(f, filesystem=found.filesystem).names
        except (pa.ArrowException, OSError):
            continue
        repeated = repeated_names(names)
        if repeated:
            return SchemaError(
                f"{f}: column name(s) {', '.join(map(repr, repeated))} appear more than once; "
                "rewrite the file with every column named once so that each has one meaning"
            )
    return None


def _open(source: Source, log_schema: LogSchema | None = None) -> _Opened:
    required = log_schema.required if log_schema is not None else ()
    if isinstance(source, (str, os.PathLike)):
        found = locate_input(source, what="logs", argument="source")
        if found.is_dir:
            return _open_directory(found)
        check_parquet_file(found.path, fs=found.filesystem)
        try:
            dataset = ds.dataset(found.path, format="parquet", filesystem=found.filesystem)
            dataset.schema  # noqa: B018 - forces the footer to be read
        except (pa.ArrowException, OSError) as exc:
            raise (_repeated_name_error(found) or DataFileError(
                f"{found.name} is not a readable parquet file: {exc}")) from None
        return _Opened(found.name, dataset, None, file=found.path, filesystem=found.filesystem,
                       required=required, files=1)
    if isinstance(source, ds.Dataset):
        return _Opened("<Dataset>", source, None)
    if isinstance(source, pa.Table):
        return _Opened("<Table>", None, source)
    if isinstance(source, pa.RecordBatch):
        return _Opened("<RecordBatch>", None, pa.Table.from_batches([source]))
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(source, pandas.DataFrame):
        return _Opened("<DataFrame>", None, _from_pandas(source))
    if hasattr(source, "__arrow_c_stream__"):  # polars, duckdb, ... via the Arrow C stream
        try:
            table = pa.table(source)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise SchemaError(
                f"cannot convert the {type(source).__name__} to an Arrow table: {exc}"
            ) from None
        return _Opened(f"<{type(source).__name__}>", None, table)
    raise ParameterError(
        "source must be a parquet path (file or directory), a pyarrow.dataset.Dataset, a "
        "pyarrow.Table, a pandas.DataFrame or an object exporting an Arrow stream; got "
        f"{type(source).__name__}"
    )


def _open_and_plan(
    source: Source, log_schema: LogSchema, mapping: Mapping[str, str] | None,
    columns: Sequence[str] | None,
) -> tuple[_Opened, ColumnPlan]:
    """Open a source and plan its columns (names and types checked before any row is read)."""
    opened = _open(source, log_schema)
    plan = plan_columns(opened.schema, log_schema, mapping=mapping, columns=columns,
                        source=opened.name, missing_hints=opened.hints)
    opened.reconcile(plan, log_schema)
    return opened, plan


def check_on_invalid(on_invalid: Any) -> str:
    """``on_invalid`` of a reader: ``"raise"`` or ``"drop"`` (else a ParameterError)."""
    return check_choice(on_invalid, "on_invalid", ON_INVALID)


# --------------------------------------------------------------------------------------------
# reports
# --------------------------------------------------------------------------------------------


def _dropped_event_ids(table: pa.Table, masks: dict[str, np.ndarray]) -> pa.Array | None:
    """The non-null ``event_id`` of the rows the masks reject (None without an id column)."""
    if "event_id" not in table.column_names:
        return None
    bad = np.zeros(table.num_rows, dtype=bool)
    for mask in masks.values():
        bad |= mask
    ids = table.column("event_id")
    if not bad.any():
        return pa.array([], type=ids.type)
    return pc.drop_null(ids.filter(pa.array(bad))).combine_chunks()


def _described(report: ValidationReport, opened: _Opened, columns: Sequence[str]) -> ValidationReport:
    """``report`` with what it describes: the columns read, the files, the entries skipped."""
    return replace(report, columns=tuple(columns), files_read=opened.files,
                   skipped=opened.skipped)


def _finish(
    table: pa.Table, masks: dict[str, np.ndarray], opened: _Opened, on_invalid: str, what: str
) -> tuple[pa.Table, ValidationReport]:
    report, bad = ValidationReport.from_masks(
        masks, table.num_rows, opened.name, dropped=on_invalid == "drop"
    )
    report = _described(report, opened, table.column_names)
    if bad is not None:
        if on_invalid == "raise":
            raise ValidationError(report.failure_message(what), report=report)
        table = table.filter(pa.array(~bad))
        report.warn_dropped(stacklevel=4)
    if report.rows_used == 0:
        raise report.no_rows_error()
    return table, report


# --------------------------------------------------------------------------------------------
# ope's schema metadata: what travels with the rows (importer records, the action features)
# --------------------------------------------------------------------------------------------

#: Schema metadata key of logs that carry their action (item) feature table: an Arrow IPC
#: stream, base64-encoded. ``ope import obd`` embeds ``item_context.csv`` under it, so the
#: parquet file alone holds everything DM/DR need; :func:`read_logs` restores the table as
#: ``logs.action_features``.
ACTION_FEATURES_KEY: Final = b"ope.action_features"

#: Prefix of ope's own schema metadata keys (``ope.source_format``, ``ope.context_columns``,
#: ``ope.propensity_source``, :data:`ACTION_FEATURES_KEY`, ...), which :func:`read_logs` keeps.
_OPE_METADATA_PREFIX: Final = b"ope."


def with_action_features(table: pa.Table, features: pa.Table) -> pa.Table:
    """``table`` with the action-feature table ``features`` embedded in its schema metadata.

    The table travels with the rows: through ``pyarrow.parquet.write_table``, ``take`` and
    ``filter``, and back through :func:`read_logs` (:func:`embedded_action_features`).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.io import embedded_action_features, with_action_features
    >>> logs = pa.table({"action": [1, 0], "propensity": [0.5, 0.5], "reward": [1.0, 0.0]})
    >>> items = pa.table({"action": [0, 1], "price": [9.5, 3.0]})
    >>> embedded_action_features(with_action_features(logs, items).schema).equals(items)
    True
    """
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, features.schema) as writer:
        writer.write_table(features)
    blob = base64.b64encode(sink.getvalue().to_pybytes())
    return table.replace_schema_metadata(
        {**(table.schema.metadata or {}), ACTION_FEATURES_KEY: blob}
    )


def embedded_action_features(schema: pa.Schema) -> pa.Table | None:
    """The action-feature table embedded by :func:`with_action_features` (None without one).

    Raises
    ------
    DataFileError
        The metadata entry is not a base64 Arrow IPC stream (written by something else, or cut).
    """
    raw = (schema.metadata or {}).get(ACTION_FEATURES_KEY)
    if raw is None:
        return None
    try:
        with pa.ipc.open_stream(pa.py_buffer(base64.b64decode(raw, validate=True))) as reader:
            return reader.read_all()
    except (binascii.Error, ValueError, pa.ArrowInvalid) as exc:
        raise DataFileError(
            f"the schema metadata {ACTION_FEATURES_KEY.decode()!r} is not an action-feature table "
            f"(a base64 Arrow IPC stream, as ope import writes): {exc}. Re-import the source, "
            "or remove the entry and pass action_features=... to ope.evaluate."
        ) from None


def _ope_metadata(schema: pa.Schema) -> dict[bytes, bytes]:
    """ope's own entries of a source's schema metadata (other entries, e.g. pandas', describe
    the source's columns, not the validated table), less the propensity provenance, which
    :attr:`provenance` reads from every file of the source."""
    return {k: v for k, v in (schema.metadata or {}).items()
            if k.startswith(_OPE_METADATA_PREFIX) and not k.startswith(PROVENANCE_PREFIX)}


# --------------------------------------------------------------------------------------------
# eager readers
# --------------------------------------------------------------------------------------------

def read_logs(
    source: Source,
    *,
    mapping: Mapping[str, str] | None = None,
    on_invalid: OnInvalid = "raise",
    columns: Sequence[str] | None = None,
) -> BanditLogs:
    """Read and validate bandit / recommendation logs (one row per decision).

    Parameters
    ----------
    source : str, os.PathLike, pyarrow.dataset.Dataset, pyarrow.Table or pandas.DataFrame
        A parquet file, a directory of parquet files (hive partitions become columns), a
        dataset, or data in memory.
    mapping : dict, optional
        ``{"our_name": "their_name"}``: which of your columns hold ope's ``action``,
        ``propensity``, ``reward``, ``event_id``, ``target__<name>``, ... columns.
    on_invalid : {"raise", "drop"}, default "raise"
        What to do with rows that break a rule: raise ``ValidationError`` with the report, or
        drop them, warn with ``DroppedRowsWarning`` and keep the counts in ``logs.report``.
    columns : sequence of str, optional
        Optional columns to read besides the required ``action``, ``propensity``, ``reward``
        (ope's names). Only these are read from parquet. ``None`` reads every column.

    Returns
    -------
    BanditLogs
        The validated table (canonical names and types) and its ``ValidationReport``. ope's
        own schema metadata (keys ``ope.*``: an importer's record of the source, the context
        columns it chose) stays on ``logs.table``; an action-feature table embedded by an
        importer (``ope import obd``: :data:`ACTION_FEATURES_KEY`) becomes
        ``logs.action_features``, which DM/DR and the policy learners join on the action.

    Raises
    ------
    DataFileError
        The path is missing, empty, truncated, corrupt, or not parquet.
    SchemaError
        Required columns are missing or columns cannot be cast without loss (all are listed).
    ValidationError
        Rows break rules (``on_invalid="raise"``), or no row is left. ``.report`` has counts.

    Notes
    -----
    The row rules and their names are listed in ``ope.schema.REJECTION_REASONS``. A row is
    used only if it passes all of them; with ``on_invalid="drop"`` exactly
    ``report.rows_read - report.rows_used`` rows are dropped. Duplicate ``event_id`` values
    reject every occurrence after the first. The ids of dropped rows are kept in
    ``logs.dropped_event_ids``, so that a policy table written for the whole log can still be
    joined: its rows for dropped events are ignored and counted (see
    :func:`ope.policies.target_propensities`).

    A directory is read as the union of its files' columns. Every column ope knows (``action``,
    ``event_id``, ``target__<name>``, ...) must be in every file, in compatible types; another
    column that only some files have (a segment added later) is null in the others. Files and
    folders whose names start with ``.`` or ``_`` (``_SUCCESS``, ``.crc``) are skipped; any
    other file must be parquet. Hive partitions (``day=1/``) become columns. Symbolic links are
    followed, but a file or folder is read once however many paths lead to it (a link to the
    directory itself or to a partition is skipped); a FIFO, socket or device is never opened;
    both are named in ``report.skipped``. A dangling link or a link loop is a
    ``DataFileError``. ``file://`` URIs are local paths; ``s3://``, ``gs://``, ``hdfs://`` and
    ``abfs://`` are read through ``pyarrow.fs``.

    A pandas index is data when it is named: a DataFrame's named index levels become columns,
    and a named RangeIndex that ``DataFrame.to_parquet`` kept only in the file's metadata is
    read as an int64 column when it describes exactly the file's rows within int64 (else a
    ``SchemaError``); metadata never supplies a required column.

    References
    ----------
    .. [1] Apache Parquet file format, https://parquet.apache.org/docs/file-format/

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.io import read_logs
    >>> df = pd.DataFrame({"item": [3, 1, 2], "pscore": [0.5, 0.25, 0.0], "click": [1, 0, 1]})
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     logs = read_logs(df, mapping={"action": "item", "propensity": "pscore",
    ...                                   "reward": "click"}, on_invalid="drop")
    >>> logs.n, logs.report.rejected
    (2, {'propensity_out_of_range': 1})
    >>> logs.column("reward")
    array([1., 0.])
    """
    check_on_invalid(on_invalid)
    opened, plan = _open_and_plan(source, BANDIT, mapping, columns)
    table = conform(opened.read(plan.source_columns), plan)
    masks = check_bandit_rows(table, unit_roundoff=plan.unit_roundoff)
    dropped_ids = _dropped_event_ids(table, masks) if on_invalid == "drop" else None
    table, report = _finish(table, masks, opened, on_invalid, "bandit-log")
    # ope's own entries (an embedded item table, ...) and the propensity provenance of every
    # file of the source (a directory whose files disagree is marked estimated)
    kept = {**_ope_metadata(opened.schema), **opened.provenance}
    if kept:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **kept})
    return BanditLogs.from_validated(table, report, dropped_event_ids=dropped_ids,
                                     unit_roundoff=plan.unit_roundoff,
                                     action_features=embedded_action_features(table.schema))


def read_trajectories(
    source: Source,
    *,
    mapping: Mapping[str, str] | None = None,
    on_invalid: OnInvalid = "raise",
    columns: Sequence[str] | None = None,
) -> Trajectories:
    """Read and validate multi-step trajectories (one row per step), sorted by episode and step.

    Parameters
    ----------
    source : str, os.PathLike, pyarrow.dataset.Dataset, pyarrow.Table or pandas.DataFrame
        A parquet file, a directory of parquet files, a dataset, or data in memory. Rows may come
        in any order.
    mapping : dict, optional
        ``{"our_name": "their_name"}`` for ``episode_id``, ``step``, ``action``, ``propensity``,
        ``reward``, ``done`` and ``target__<name>`` columns.
    on_invalid : {"raise", "drop"}, default "raise"
        Raise ``ValidationError`` on any invalid row, or drop every episode that holds one
        (its valid rows are counted under ``episode_invalidated``).
    columns : sequence of str, optional
        Optional columns to read besides the required ones; ``None`` reads every column.

    Returns
    -------
    Trajectories
        Sorted by (episode_id, step), with ``episode_starts`` offsets and a per-episode
        ``truncated`` flag.

    Notes
    -----
    Within an episode the steps must be exactly 0, 1, ..., L-1 (rows at the first gap or repeat
    onwards are ``step_not_contiguous``) and ``done`` may be true only at step L-1. An episode
    whose last row has ``done = False`` is valid and marked truncated.

    References
    ----------
    .. [1] Thomas, P. and Brunskill, E. (2016). Data-efficient off-policy policy evaluation for
       reinforcement learning. ICML.

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.io import read_trajectories
    >>> df = pd.DataFrame({"episode_id": [1, 0, 0, 1], "step": [0, 1, 0, 1],
    ...                    "action": [0, 1, 1, 0], "propensity": 0.5, "reward": 1.0,
    ...                    "done": [False, True, False, False]})
    >>> traj = read_trajectories(df)
    >>> traj.episode_starts.tolist(), traj.truncated.tolist()
    ([0, 2, 4], [False, True])
    """
    check_on_invalid(on_invalid)
    opened, plan = _open_and_plan(source, TRAJECTORY, mapping, columns)
    table = conform(opened.read(plan.source_columns), plan)
    masks, order = check_trajectory_rows(table)
    eid = table.column("episode_id")
    report, bad = ValidationReport.from_masks(
        masks, table.num_rows, opened.name, dropped=on_invalid == "drop"
    )
    valid_eid = pc.drop_null(eid)
    kept_eid = eid.filter(pa.array(~bad)) if bad is not None else valid_eid
    report = replace(
        _described(report, opened, table.column_names),
        episodes_read=len(pc.unique(valid_eid)), episodes_used=len(pc.unique(kept_eid)),
    )
    # report row numbers are source positions; the result is sorted by (episode_id, step)
    table = table.take(pa.array(order))
    if bad is not None:
        if on_invalid == "raise":
            raise ValidationError(report.failure_message("trajectory"), report=report)
        table = table.filter(pa.array(~bad[order]))
        report.warn_dropped(stacklevel=3)
    if report.rows_used == 0:
        raise report.no_rows_error()
    return Trajectories(table, report)


def read_paired(
    source: Source,
    *,
    mapping: Mapping[str, str] | None = None,
    on_invalid: OnInvalid = "raise",
    columns: Sequence[str] | None = None,
) -> PairedReplays:
    """Read and validate paired replays (counterfactual branches sharing a prefix).

    Parameters
    ----------
    source : str, os.PathLike, pyarrow.dataset.Dataset, pyarrow.Table or pandas.DataFrame
        A parquet file, a directory of parquet files, a dataset, or data in memory.
    mapping : dict, optional
        ``{"our_name": "their_name"}`` for ``pair_id``, ``arm``, ``outcome``, ``replicate``.
    on_invalid : {"raise", "drop"}, default "raise"
        Raise ``ValidationError`` on any invalid row, or drop the invalid rows and every row
        of a pair left without one of the arms (``pair_missing_arm``).
    columns : sequence of str, optional
        Optional columns to read besides the required ones; ``None`` reads every column.

    Returns
    -------
    PairedReplays

    Raises
    ------
    ValidationError
        Rows break rules (``on_invalid="raise"``), no row is left, or fewer than two arms
        remain (a paired comparison needs two).

    Notes
    -----
    A pair is usable when it holds a valid row for every arm present among the valid rows;
    ``(pair_id, arm, replicate)`` must be unique.

    References
    ----------
    .. [1] Rubin, D. B. (1974). Estimating causal effects of treatments in randomized and
       nonrandomized studies. Journal of Educational Psychology 66(5).

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.io import read_paired
    >>> df = pd.DataFrame({"pair_id": [0, 0, 1, 1], "arm": ["a", "b", "a", "b"],
    ...                    "outcome": [1.0, 0.0, 1.0, 1.0]})
    >>> read_paired(df).arms
    ['a', 'b']
    """
    check_on_invalid(on_invalid)
    opened, plan = _open_and_plan(source, PAIRED, mapping, columns)
    table = conform(opened.read(plan.source_columns), plan)
    masks = check_paired_rows(table)
    table, report = _finish(table, masks, opened, on_invalid, "paired-replay")
    arms = pc.unique(table.column("arm"))
    if len(arms) < 2:
        raise ValidationError(
            f"{opened.name} has only one arm ({arms.to_pylist()[0]!r}) among its valid rows; "
            "paired replays compare at least two arms per pair",
            report=report,
        )
    return PairedReplays(table, report)


# --------------------------------------------------------------------------------------------
# streaming
# --------------------------------------------------------------------------------------------


class LogScan:
    """A lazy, validated pass over bandit logs in record batches (see :func:`scan_logs`).

    :meth:`to_batches` (or iterating) yields ``BanditLogs`` batches; each pass re-reads the
    source. ``report`` holds the merged ``ValidationReport`` once a pass has completed, and
    ``seen_id_bytes`` the memory the cross-batch ``event_id`` check used.

    Attributes
    ----------
    source : str
        Where the rows come from.
    columns : list of str
        The columns of every yielded batch (ope's names).
    plan : ope.schema.ColumnPlan
        How source columns are read, renamed and cast (checked before any row is read).
    dataset : pyarrow.dataset.Dataset or None
        The source as a dataset, each column in the widest type of its files (None for data
        in memory).
    on_invalid : {"raise", "drop"}
    batch_size : int

    Examples
    --------
    >>> import pyarrow as pa
    >>> from ope.io import scan_logs
    >>> t = pa.table({"event_id": [1, 2, 3, 2], "action": [0, 1, 0, 1],
    ...               "propensity": [0.5] * 4, "reward": [1.0, 0.0, 1.0, 1.0]})
    >>> scan = scan_logs(t, batch_size=2, on_invalid="drop")
    >>> scan.count_rows(), scan.dataset is None
    (4, True)
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     sizes = [batch.n for batch in scan.to_batches()]
    >>> sizes, scan.report.rejected, scan.report.examples
    ([2, 1], {'event_id_duplicate': 1}, {'event_id_duplicate': (3,)})
    """

    def __init__(
        self, opened: _Opened, plan: ColumnPlan, on_invalid: str, batch_size: int
    ) -> None:
        self._opened = opened
        self.plan = plan
        self.on_invalid = on_invalid
        self.batch_size = batch_size
        self._report: ValidationReport | None = None
        self.seen_id_bytes = 0

    @property
    def source(self) -> str:
        """Where the rows come from (a path, ``"<DataFrame>"``, ...)."""
        return self._opened.name

    @property
    def columns(self) -> list[str]:
        """The columns of every yielded batch (ope's names)."""
        return self.plan.output_columns

    @property
    def dataset(self) -> ds.Dataset | None:
        """The source as a pyarrow dataset (None for data in memory)."""
        return self._opened.dataset

    @property
    def metadata(self) -> dict[bytes, bytes]:
        """The schema metadata every yielded batch carries: the propensity provenance
        (``ope.propensity_source`` and its companions; see :func:`ope.propensity.propensity_info`)."""
        return self._opened.provenance

    def count_rows(self) -> int:
        """Rows in the source before validation (from parquet footers; reads no data)."""
        return self._opened.count_rows()

    def describe(self, report: ValidationReport) -> ValidationReport:
        """``report`` (of rows of this scan's source) with the source's columns, the number of
        files read and the directory entries skipped, as the readers' reports carry them.

        For code that validates the scan's rows its own way (``ope.distributed``).
        """
        if not isinstance(report, ValidationReport):
            raise ParameterError(
                f"`report` must be an ope.ValidationReport (e.g. from "
                f"ope.ValidationReport.from_masks); got {describe(report)}.")
        return _described(report, self._opened, self.columns)

    @property
    def report(self) -> ValidationReport:
        """The merged report of the last complete pass."""
        if self._report is None:
            raise RuntimeError(
                "the scan's report is complete only after a full pass over the data; iterate "
                "over it first (for batch in scan.to_batches(): ...)"
            )
        return self._report

    def __repr__(self) -> str:
        return f"LogScan(source={self.source!r}, columns={self.columns}, batch_size={self.batch_size:,})"

    def __iter__(self) -> Iterator[BanditLogs]:
        return self.to_batches()

    def to_batches(self) -> Iterator[BanditLogs]:
        """One validated pass: ``BanditLogs`` batches, each with its own batch report.

        Raises
        ------
        ope.ValidationError
            At the first batch holding an invalid row under ``on_invalid="raise"``, or at the
            end of a pass that kept no row.
        """
        source = self.source
        drop = self.on_invalid == "drop"
        total = _described(ValidationReport(source, 0, 0, dropped=False), self._opened,
                           self.columns)
        seen = SeenIds() if "event_id" in self.plan.output_columns else None
        # a bar over rows (its total from the parquet footers, read only when it is drawn)
        bar = progress(desc=f"scan {source}", total=self.count_rows() if progress_enabled()
                       else None, unit="row")
        with bar:
            yield from self._pass(source, drop, total, seen, bar)

    def _pass(
        self, source: str, drop: bool, total: ValidationReport, seen: SeenIds | None, bar: Any
    ) -> Iterator[BanditLogs]:
        offset = 0
        metadata = self.metadata or None
        for batch in self._opened.batches(self.plan.source_columns, self.batch_size):
            n = batch.num_rows
            bar.update(n)
            if n == 0:
                continue
            table = conform(pa.Table.from_batches([batch]), self.plan, row_offset=offset)
            table = table.replace_schema_metadata(metadata)
            masks = check_bandit_rows(table, unit_roundoff=self.plan.unit_roundoff)
            if seen is not None:
                mark_repeats(table, masks, seen)
            part, bad = ValidationReport.from_masks(masks, n, source, dropped=drop, row_offset=offset)
            total = total.merge(part)
            offset += n
            dropped_ids = None
            if bad is not None:
                if not drop:
                    self._report = None
                    raise ValidationError(
                        total.failure_message(
                            tail=f" (the scan stopped after row {offset - 1:,}; later rows were "
                            "not checked)"
                        ),
                        report=total,
                    )
                dropped_ids = _dropped_event_ids(table, masks)
                table = table.filter(pa.array(~bad))
            if table.num_rows:
                yield BanditLogs.from_validated(table, part, dropped_event_ids=dropped_ids,
                                                unit_roundoff=self.plan.unit_roundoff)
        self.seen_id_bytes = seen.nbytes if seen is not None else 0
        self._report = total
        if total.rows_used == 0:
            raise total.no_rows_error()
        if total.rows_rejected:
            total.warn_dropped(stacklevel=4)


def scan_logs(
    source: Source,
    *,
    mapping: Mapping[str, str] | None = None,
    on_invalid: OnInvalid = "raise",
    columns: Sequence[str] | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> LogScan:
    """Scan bandit logs lazily: validated record batches in bounded memory.

    Names and types are checked now (so a ``SchemaError`` comes before any data is read);
    rows are read, cast and validated batch by batch while you iterate.

    Parameters
    ----------
    source : str, os.PathLike, pyarrow.dataset.Dataset, pyarrow.Table or pandas.DataFrame
        A parquet file, a directory of parquet files, a dataset, or data in memory.
    mapping : dict, optional
        ``{"our_name": "their_name"}``, as in :func:`read_logs`.
    on_invalid : {"raise", "drop"}, default "raise"
        ``"raise"`` raises ``ValidationError`` at the first batch holding an invalid row (its
        report covers the rows up to the end of that batch). ``"drop"`` drops invalid rows from
        each batch and warns once, with the merged counts, at the end of the pass.
    columns : sequence of str, optional
        Optional columns to read besides the required ones; only these are read from parquet.
    batch_size : int, default 262_144
        Maximum rows per batch (batches can be smaller at row-group and file boundaries).

    Returns
    -------
    LogScan
        Iterate for ``BanditLogs`` batches (each with its own batch report); ``.report`` gives
        the merged report after a complete pass.

    Notes
    -----
    Every rule of :func:`read_logs` applies per batch, and ``event_id_duplicate`` is also
    checked across batches: a complete pass yields exactly the rows :func:`read_logs` keeps and
    the same merged report. The ids seen so far are kept as sorted numpy arrays: 8 bytes per
    distinct int64 id (16 bytes transiently while runs merge), or, per string id, an 8-byte
    hash plus the longest id's length and one byte, with every hash match confirmed on the
    bytes (``LogScan.seen_id_bytes`` after a pass). Scanning without an ``event_id`` column
    keeps no per-row state.

    References
    ----------
    .. [1] Apache Arrow, Tabular Datasets, https://arrow.apache.org/docs/python/dataset.html

    Examples
    --------
    >>> import pandas as pd
    >>> from ope.io import scan_logs
    >>> df = pd.DataFrame({"event_id": range(10), "action": 1, "propensity": 0.5, "reward": 1.0})
    >>> scan = scan_logs(df, batch_size=4)
    >>> [batch.n for batch in scan]
    [4, 4, 2]
    >>> scan.report.rows_used
    10
    """
    check_on_invalid(on_invalid)
    batch_size = check_positive_int(batch_size, "batch_size")
    opened, plan = _open_and_plan(source, BANDIT, mapping, columns)
    return LogScan(opened, plan, on_invalid, batch_size)
