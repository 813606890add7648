"""Input paths: the one place that lists and opens what ope reads (logs, policy tables,
importer inputs).

:func:`locate_input` stats a path before anything opens it: only regular files are read (a
FIFO or device given as the path is refused at once, one inside a directory is skipped and
named in the report), symbolic links are followed but never into a file or folder already
read, an empty path is a ``ParameterError``, and URIs other than ``file://`` go through
``pyarrow.fs`` with a bounded first answer (:data:`REMOTE_TIMEOUT_SECONDS`). The readers of
:mod:`ope.io` and the importers use it; :mod:`ope.io` re-exports the public names.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.fs as pafs

from ope._output import is_utf8_path
from ope._validation import describe
from ope.exceptions import DataFileError, ParameterError, SchemaError
from ope.logs import SkippedPath

__all__ = [
    "SKIP_REASONS",
    "UTF8_BOM",
    "check_utf8_name",
    "csv_column_names",
    "URI_REQUIREMENTS",
    "REMOTE_TIMEOUT_SECONDS",
    "REMOTE_RETRY_SECONDS",
    "REMOTE_CONNECT_SECONDS",
    "REMOTE_REQUEST_SECONDS",
    "REMOTE_ATTEMPTS",
    "Located",
    "os_error",
    "filesystem_from_uri",
    "locate_input",
    "check_regular_file",
]

#: The UTF-8 byte-order mark some tools (Windows, .NET) write before a text file's first line:
#: not part of that line.
UTF8_BOM: Final = b"\xef\xbb\xbf"

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
        why = (
            f"one of its components is {longest:,} bytes long and this filesystem allows "
            f"{name_max:,} per file or folder name"
        )
    else:
        why = f"it is {total:,} bytes long and this system allows {path_max:,}"
    return DataFileError(
        f"{what} path {shown!r} ({len(path):,} characters) is too long: {why} (ENAMETOOLONG). "
        "Check how the path was built (a value pasted twice, a list joined into one name), or "
        "move the data to a shorter path"
    )


def os_error(exc: OSError, path: str, what: str) -> DataFileError:
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


def csv_column_names(table: pa.Table | pa.Schema, what: str) -> list[str]:
    """The column names of a table (or schema) pyarrow read from a CSV file: its header, decoded
    only when asked for; one that is not UTF-8 text is a SchemaError naming ``what`` (a
    UnicodeDecodeError from pyarrow otherwise)."""
    try:
        return list(table.column_names if isinstance(table, pa.Table) else table.names)
    except UnicodeDecodeError:
        raise SchemaError(
            f"{what}: its header line (the column names) is not UTF-8 text; ope reads CSV as "
            "UTF-8. Re-save the file as UTF-8, e.g. pandas.read_csv(path, "
            "encoding='latin-1').to_csv(path, index=False), using the encoding it was written in"
        ) from None


def check_utf8_name(path: str, what: str) -> None:
    """A DataFileError when ``path`` is not valid UTF-8: a name the file system holds (bytes
    Python keeps as surrogate escapes) that pyarrow, which opens UTF-8 paths only, cannot
    open (:func:`ope._output.is_utf8_path`)."""
    if not is_utf8_path(path):
        raise DataFileError(
            f"{what} path {path!r} is not valid UTF-8 (the file system holds bytes that no text "
            "decodes to, shown as \\udcXX); pyarrow opens only UTF-8 paths: rename the file or "
            "folder"
        )


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
        raise os_error(FileNotFoundError(errno.ENOENT, "missing"), path, what) from None
    except ValueError:  # an embedded NUL byte
        raise ParameterError(f"{what} path {path!r} contains a NUL character") from None
    except OSError as exc:
        raise os_error(exc, path, what) from None


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
        check_utf8_name(path, what)  # only a path that will be read (a skipped one is named)
        key = (st.st_dev, st.st_ino)
        if key in seen_files:
            detail = (
                f"the same file as {seen_files[key]}"
                if via is None
                else (f"a link to {via}, the same file as {seen_files[key]}")
            )
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
                raise os_error(exc, d, what) from None
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
                    raise os_error(exc, entry.path, what) from None
                if stat.S_ISDIR(st.st_mode):
                    key = (st.st_dev, st.st_ino)
                    if key in seen_dirs:  # a bind mount of a folder already read
                        skipped.append(
                            SkippedPath(entry.path, "already_read", "a folder already read")
                        )
                        continue
                    seen_dirs.add(key)
                    subdirs.append(entry.path)
                elif stat.S_ISREG(st.st_mode):
                    add_file(entry.path, st, None)
                else:
                    skipped.append(
                        SkippedPath(entry.path, "not_regular_file", _kind_of_mode(st.st_mode))
                    )
            stack.extend(reversed(subdirs))

    scan(root)
    while links:  # links last, so that a file is listed under its real path when it has one
        link = links.pop(0)
        target = os.readlink(link)
        st = _stat_local(link, what)
        key = (st.st_dev, st.st_ino)
        if stat.S_ISDIR(st.st_mode):
            if key in seen_dirs:
                skipped.append(
                    SkippedPath(link, "already_read", f"a link to {target}, a folder already read")
                )
                continue
            seen_dirs.add(key)
            scan(link)
        elif stat.S_ISREG(st.st_mode):
            add_file(link, st, target)
        else:
            skipped.append(
                SkippedPath(
                    link, "not_regular_file", f"a link to {target}, {_kind_of_mode(st.st_mode)}"
                )
            )
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
        rel = info.path[len(root) :].lstrip("/") if info.path.startswith(root) else info.path
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
        unavailable = any(
            s in text.lower()
            for s in (
                "not enabled",
                "support",
                "libjvm",
                "libhdfs",
                "java",
                "not implemented",
                "unable to load",
            )
        )
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
    options = {
        **options,
        "connect_timeout": REMOTE_CONNECT_SECONDS,
        "request_timeout": REMOTE_REQUEST_SECONDS,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=REMOTE_ATTEMPTS),
    }
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
            f"{URI_REQUIREMENTS.get(scheme.lower(), 'network access')}"
        )
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


def locate_input(
    source: str | os.PathLike[str],
    *,
    what: str = "logs",
    directories: bool = True,
    argument: str | None = None,
) -> Located:
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
            f"{named}{what} path must be a str or os.PathLike of str, got bytes {raw!r}"
        )
    if not raw.strip():
        raise ParameterError(f"{named}the {what} path is empty; give a file, a directory or a URI")
    if "\x00" in raw:
        raise ParameterError(f"{named}{what} path {raw!r} contains a NUL character")
    check_utf8_name(raw, f"{named}{what}")
    m = _URI.match(raw)
    if m is not None and m.group(1).lower() != "file":
        fs, path, info = _within(REMOTE_TIMEOUT_SECONDS, lambda: _stat_remote(raw, what), raw, what)
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
    check_utf8_name(p, what)
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else _kind_of_mode(st.st_mode)
        raise DataFileError(f"{what} {p} is {kind}, not a regular file")
    return Path(p)
