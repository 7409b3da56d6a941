"""Writing tables and reports atomically (a temporary file in the same folder, then a rename).

A failed run never leaves a half-written output: the temporary file is removed on any error.
A command's outputs together (:class:`Outputs`): checked before any work (distinct, not an input,
writable), each written to a temporary file beside it, all renamed at the end; a failing write of
any leaves none of them. Every ``OSError`` of a write becomes one :class:`OutputError` line naming the
path and the cause.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from ..backend import frame_to_arrow, frame_to_host, is_device_frame
from .csv_out import mixed_as_text, write_csv
from ..errors import InputError, OutputError
from .jsonsafe import json_safe

OUTPUT_EXTENSIONS = (".csv", ".csv.gz", ".parquet", ".pq")

#: file systems that hold no regular files (the kernel's views, devices)
_PSEUDO_FS = {"proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs",
              "configfs", "pstore", "bpf", "mqueue", "fusectl", "binfmt_misc", "autofs", "efivarfs", "rpc_pipefs",
              "nsfs"}
_PSEUDO_DIRS = ("/proc", "/sys", "/dev")

_CAUSES = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exhausted",
           errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
           errno.EPERM: "permission denied", errno.ENOENT: "its folder does not exist (any more)",
           errno.EFBIG: "the file is too large for the file system", errno.ENAMETOOLONG: "the name is too long",
           errno.EIO: "input/output error on the device", errno.ENOTDIR: "a part of the path is not a folder",
           errno.EISDIR: "it is a folder"}
_FIXES = {errno.ENOSPC: "free some space or write elsewhere", errno.EDQUOT: "free some space or write elsewhere",
          errno.EROFS: "write to another folder", errno.EACCES: "write to a folder you may write to",
          errno.EPERM: "write to a folder you may write to"}


def _errno(exc: BaseException) -> int | None:
    """The errno of an OSError, also when a library (pyarrow) gives it only in the text."""
    if getattr(exc, "errno", None):
        return exc.errno
    text = str(exc)
    for code, words in ((errno.ENOSPC, "No space left"), (errno.EROFS, "Read-only file system"),
                        (errno.EACCES, "Permission denied"), (errno.EDQUOT, "quota exceeded")):
        if words.lower() in text.lower() or f"[Errno {code}]" in text:
            return code
    return None


def write_error(path, exc: BaseException) -> OutputError:
    """The one-line error for an ``OSError`` while writing ``path``: the path, the cause, the fix."""
    if isinstance(exc, OutputError):
        return OutputError(f"cannot write '{path}': {exc.cause}") if getattr(exc, "cause", None) else exc
    code = _errno(exc)
    if code in _CAUSES:
        cause = _CAUSES[code]
    else:
        cause = (os.strerror(code) if code else " ".join(str(exc).split()) or type(exc).__name__).lower()
    if code is not None:
        cause += f" ({errno.errorcode.get(code, code)})"
    fix = _FIXES.get(code)
    err = OutputError(f"cannot write '{path}': {cause}" + (f"; {fix}" if fix else "") + "; nothing was written")
    err.cause = cause + (f"; {fix}" if fix else "") + "; nothing was written"
    return err


def _pseudo_place(folder: Path) -> bool:
    """True when ``folder`` lies on the kernel's own file systems (/proc, /sys, devices)."""
    f = str(folder)
    if f == "/dev/shm" or f.startswith("/dev/shm/"):
        return False
    if any(f == d or f.startswith(d + "/") for d in _PSEUDO_DIRS):
        return True
    try:  # the file system of the longest mount point above the folder
        best, kind = "", ""
        with open("/proc/self/mounts", encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3:
                    mnt = parts[1].replace("\\040", " ")
                    if (f == mnt or f.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                        best, kind = mnt, parts[2]
        return kind in _PSEUDO_FS
    except OSError:
        return False


def output_kind(path: str | os.PathLike) -> str:
    """'csv' or 'parquet' from the file name; InputError for anything else."""
    p = str(path).lower()
    if p.endswith(".csv") or p.endswith(".csv.gz"):
        return "csv"
    if p.endswith(".parquet") or p.endswith(".pq"):
        return "parquet"
    if str(path).endswith(("/", os.sep)):
        raise InputError(f"output '{path}' names a folder, which does not exist; name a file, e.g. "
                         f"'{Path(path) / 'out.csv'}'")
    raise InputError(f"output '{path}' has an unknown extension; use one of {', '.join(OUTPUT_EXTENSIONS)}")


def check_writable(path: str | os.PathLike, *, table: bool = True) -> None:
    """Fail early (before any work) when an output cannot be written: a folder, an unknown table
    extension, a device or other non-regular file, a place for no files (/proc, /sys), a missing,
    read-only or full folder (a probe file is created and removed there)."""
    if Path(path).is_dir():
        raise InputError(f"cannot write '{path}': it is a folder; name a file inside it"
                         + (f", e.g. '{Path(path) / 'out.csv'}'" if table else ""))
    if table:
        output_kind(path)
    folder = Path(path).resolve().parent
    if _pseudo_place(folder):
        raise OutputError(f"cannot write '{path}': '{folder}' is not a regular place for files (the system's "
                          f"own view of processes or devices); write to an ordinary folder")
    if os.path.lexists(path) and os.path.exists(path) and not Path(path).is_file():
        raise OutputError(f"cannot write '{path}': it exists and is not a regular file (a device, pipe or "
                          f"socket), which a finished output would replace; name a regular file")
    if not folder.is_dir():
        raise InputError(f"cannot write '{path}': folder '{folder}' does not exist; create it first")
    try:  # a probe file tells what os.access cannot (a read-only mount under root's rights) and why
        fd, probe = tempfile.mkstemp(prefix=f".{Path(path).name}.", suffix=".tmp", dir=str(folder))
        os.close(fd)
        os.unlink(probe)
        st = os.statvfs(folder)
    except OSError as exc:
        raise write_error(path, exc) from None
    if st.f_bavail == 0 and st.f_blocks > 0:
        raise write_error(path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))


def _same_file(a, b) -> bool:
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return Path(a).resolve() == Path(b).resolve()


def _other_name(label: str, path) -> str:
    p = Path(str(path))
    label = label.split()[0]
    ext = {"--report": ".json", "--html": ".html", "--plot": ".png", "--png": ".png", "--table": ".md"}.get(label)
    stem = p.name.split(".")[0]
    if ext and not p.name.lower().endswith(ext):
        return str(p.with_name(stem + ext))
    return str(p.with_name(stem + "_" + label.lstrip("-").split()[0] + "".join(p.suffixes)))


class Outputs:
    """Every file a command writes: checked together before any work, written together at the end.

    >>> outs = Outputs()
    >>> outs.add("--out", "o.csv", table=True); outs.add("--report", "o.csv")
    'o.csv'
    'o.csv'
    >>> outs.check()
    Traceback (most recent call last):
    ...
    gpuanon.errors.OutputError: --report 'o.csv' is the same file as --out 'o.csv'; each output needs its own name, e.g. --report o.json
    """

    def __init__(self, inputs: dict | None = None):
        self.items: dict[str, tuple[str, bool]] = {}
        self.inputs = {k: v for k, v in (inputs or {}).items() if isinstance(v, (str, os.PathLike)) and v}

    def add(self, label: str, path, *, table: bool = False):
        """Name an output (``label``: its option, e.g. ``--report``); None / empty: not written."""
        if path:
            self.items[label] = (str(path), table)
        return path

    def check(self) -> None:
        """Distinct outputs, none an input, each writable: one-line errors, before any work."""
        self.check_names()
        for path, table in self.items.values():
            check_writable(path, table=table)

    def check_names(self) -> None:
        """Distinct outputs, none an input (resolved paths, links followed)."""
        seen = []
        for label, (path, _table) in self.items.items():
            for in_label, inp in self.inputs.items():
                if _same_file(path, inp):
                    raise InputError(f"{label} '{path}' is {in_label}, which would be overwritten; write the "
                                     f"output to another file, e.g. '{_other_name(label, path)}'")
            for other, opath in seen:
                if _same_file(path, opath):
                    raise OutputError(f"{label} '{path}' is the same file as {other} '{opath}'; each output needs "
                                      f"its own name, e.g. {label.split()[0]} {_other_name(label, path)}")
            seen.append((label, path))

    def staging(self, label: str) -> str:
        """A temporary name beside output ``label`` (not created) for a writer that makes it itself (a
        directory of Parquet files that a cluster's workers write); :meth:`_Transaction.adopt` then
        renames it with the other outputs, or removes it."""
        path = Path(self.items[label][0])
        return str(path.resolve().parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")

    @contextmanager
    def writing(self):
        """Yield a :class:`_Transaction`; on leaving, rename every temporary file over its output (all or,
        on any error or interruption, none: the temporaries are removed)."""
        tx = _Transaction(self)
        try:
            yield tx
            tx.commit()
        except BaseException as exc:
            tx.abort()
            if isinstance(exc, OSError):
                raise write_error(tx.current or "an output", exc) from None
            raise


class _Transaction:
    def __init__(self, outputs: Outputs):
        self.outputs = outputs
        self.tmps: dict[str, str] = {}  # path -> its temporary file
        self.done: list[str] = []
        self.current = None

    def path(self, label: str) -> str:
        return self.outputs.items[label][0]

    def file(self, label: str, write) -> None:
        """``write(tmp)`` writes the output ``label`` to a temporary path beside it."""
        path = self.path(label)
        self.current = path
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{Path(path).name}.", suffix=".tmp",
                                       dir=str(Path(path).resolve().parent))
            os.close(fd)
            self.tmps[path] = tmp
            write(tmp)
        except (OSError, OutputError) as exc:
            raise write_error(path, exc) from None
        self.current = None

    def text(self, label: str, text: str) -> None:
        self.file(label, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))

    def json(self, label: str, obj: dict) -> None:
        self.file(label, lambda tmp: _dump_json(obj, tmp))

    def table(self, label: str, df, metadata: dict | None = None) -> None:
        path = self.path(label)
        self.file(label, lambda tmp: _write_table_file(df, tmp, path, metadata))

    def adopt(self, label: str, tmp: str) -> None:
        """The output ``label`` was written to ``tmp`` (:meth:`Outputs.staging`), a file or a directory."""
        self.tmps[self.path(label)] = tmp

    def commit(self) -> None:
        umask = os.umask(0)
        os.umask(umask)
        for path, tmp in self.tmps.items():
            self.current = path
            if not os.path.isdir(tmp):  # a directory was made with the usual permissions by its writer
                os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        for path, tmp in list(self.tmps.items()):
            self.current = path
            os.replace(tmp, path)
            del self.tmps[path]
            self.done.append(path)
        self.current = None

    def abort(self) -> None:
        for tmp in self.tmps.values():
            remove(tmp)
        for path in self.done:  # a rename failed after others succeeded: none of the outputs is left
            remove(path)
        self.tmps.clear()


def remove(path) -> None:
    """Remove a file or a directory tree, quietly (an output left behind by a failed run)."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError:
        pass


@contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to ``path``; rename it over ``path`` only on success. An ``OSError``
    becomes one :class:`OutputError` line naming ``path`` and the cause."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write '{path}': it is a folder; name a file inside it")
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.resolve().parent))
        os.close(fd)
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise write_error(path, exc) from None
        raise


def write_table(df, path: str | os.PathLike, metadata: dict | None = None) -> None:
    """Write CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``, ``.pq``) atomically.

    ``df`` is a pandas or a cuDF frame. A cuDF frame's Parquet file is written from its Arrow
    form (one counted copy of the output columns, dictionary columns kept as such); its plain
    CSV by cuDF's device writer.
    """
    output_kind(path)
    with atomic_path(path) as tmp:
        _write_table_file(df, tmp, path, metadata)


def _write_table_file(df, tmp, path, metadata: dict | None = None) -> None:
    """Write ``df`` to the file ``tmp`` in the format ``path``'s name says."""
    kind = output_kind(path)
    gz = str(path).lower().endswith(".gz")
    device = is_device_frame(df)
    nested = {}
    if not device and df.attrs:  # Arrow would store attrs in the file's pandas metadata: keep them out
        nested = df.attrs.get("arrow_types") or {}
        df = df.copy(deep=False)
        df.attrs = {}
    if kind == "csv":
        if device and not gz:
            df.to_csv(tmp, index=False)
        else:
            write_csv(frame_to_host(df), tmp, gz)
    else:
        import pyarrow.parquet as pq  # noqa: PLC0415

        tbl = frame_to_arrow(df) if device else _host_arrow_table(df, nested)
        tbl = _nested_types(df, tbl, nested)
        if metadata:
            meta = dict(tbl.schema.metadata or {})
            meta[b"gpuanon"] = json.dumps(json_safe(metadata), allow_nan=False, default=str).encode()
            tbl = tbl.replace_schema_metadata(meta)
        pq.write_table(tbl, tmp)


def _host_arrow_table(df, nested: dict):
    """A pandas frame as an Arrow table; a nested column Arrow cannot infer from its Python values (a map,
    whose entries pandas holds as lists of tuples) is built with the Arrow type noted when it was read."""
    try:
        return pa.Table.from_pandas(mixed_as_text(df), preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError):
        if not nested:
            raise
    names = [c for c in df.columns if c in nested]
    tbl = pa.Table.from_pandas(mixed_as_text(df.drop(columns=names)), preserve_index=False)
    for name in names:
        col = pa.array(frame_to_host(df[[name]])[name].tolist(), type=nested[name])
        tbl = tbl.add_column(list(df.columns).index(name), name, col)
    return tbl


def _nested_types(df, tbl, types: dict):
    """``tbl`` with nested columns cast back to the Arrow ``types`` noted when the input was read."""
    for name, t in types.items():
        if name in tbl.column_names and tbl.schema.field(name).type != t:
            try:
                col = pa.array(frame_to_host(df[[name]])[name].tolist(), type=t)
            except (pa.ArrowException, TypeError, ValueError):
                continue
            tbl = tbl.set_column(tbl.column_names.index(name), name, col)
    return tbl


def write_json(obj: dict, path: str | os.PathLike) -> None:
    """Write a JSON report atomically; NaN and infinity are written as ``null`` (strict JSON)."""
    with atomic_path(path) as tmp:
        _dump_json(obj, tmp)


def _dump_json(obj: dict, tmp) -> None:
    with open(tmp, "w") as f:
        json.dump(json_safe(obj), f, indent=2, allow_nan=False, default=str)
        f.write("\n")
