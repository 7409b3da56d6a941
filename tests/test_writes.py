"""Writing a command's outputs (issue 21, rows 4, 8 and 10): every output distinct and checked before
any work; all written to temporary files and renamed together, or none left; an ``OSError`` at write
time one line naming the path and the cause; SIGTERM cleans up as Ctrl-C does."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from expected import ROOT, run_cli

ADULT = ("anonymize", "--dataset", "adult", "--rows", "400", "--k", "5")


def _one_error_line(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("gpuanon: error:")]
    assert len(err) == 1, r.stderr
    return err[0]


def _left(folder: Path) -> list[str]:
    """Every file in ``folder``, hidden temporary files too."""
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture()
def table(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    n = 60
    df = pd.DataFrame({"age": rng.integers(20, 70, n), "zip": rng.choice(list("abcdef"), n),
                       "income": rng.integers(1, 9, n) * 1000.0})
    p = tmp_path / "in.csv"
    df.to_csv(p, index=False)
    return p


def _mount_tmpfs(folder: Path, options: str) -> bool:
    """Mount a tmpfs on ``folder`` (root only); False when this machine does not allow it."""
    folder.mkdir(exist_ok=True)
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    return r.returncode == 0


@pytest.fixture()
def tiny_disk(tmp_path):
    """A 64 KiB file system, filled to its last 4 KiB page: a real ENOSPC for anything bigger."""
    d = tmp_path / "tiny"
    if not _mount_tmpfs(d, "size=64k"):
        pytest.skip("cannot mount a tmpfs here (needs root and mount rights)")
    try:
        with open(d / "filler", "wb") as f:
            f.write(b"x" * (60 * 1024))
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


# ---------------------------------------------------------------------------- row 4: distinct outputs
@pytest.mark.slow
@pytest.mark.parametrize("opts, first, second", [
    (("--out", "o.csv", "--report", "o.csv"), "--out", "--report"),
    (("--out", "o.csv", "--html", "./o.csv"), "--out", "--html"),
    (("--out", "o.csv", "--report", "x.json", "--html", "x.json"), "--report", "--html"),
])
def test_two_outputs_with_one_name_are_refused_before_any_work(tmp_path, opts, first, second):
    err = _one_error_line(run_cli(*ADULT, *opts, cwd=tmp_path))
    assert f"{second} '" in err and f"is the same file as {first} '" in err and "its own name" in err, err
    assert _left(tmp_path) == []  # nothing written, not even the table


@pytest.mark.slow
def test_a_link_to_another_output_is_the_same_file(tmp_path):
    (tmp_path / "link.json").symlink_to(tmp_path / "o.csv")  # dangling until o.csv exists
    err = _one_error_line(run_cli(*ADULT, "--out", "o.csv", "--report", "link.json", cwd=tmp_path))
    assert "--report 'link.json' is the same file as --out 'o.csv'" in err


@pytest.mark.slow
def test_sweep_default_plot_next_to_out_is_checked(table, tmp_path):
    """sweep's plot defaults to --out with .png: an --out ending in .png would be overwritten by it."""
    err = _one_error_line(run_cli("sweep", str(table), "--qi", "age,zip", "--k-values", "3", "--l-values", "",
                                  "--out", "s.png", cwd=tmp_path))
    assert "--plot (default: next to --out) 's.png' is the same file as --out 's.png'" in err
    err = _one_error_line(run_cli("sweep", str(table), "--qi", "age,zip", "--k-values", "3", "--l-values", "",
                                  "--out", "s.csv", "--table", "s.csv", cwd=tmp_path))
    assert "--table 's.csv' is the same file as --out 's.csv'" in err


@pytest.mark.slow
def test_evaluate_default_report_next_to_out_is_checked(table, tmp_path):
    err = _one_error_line(run_cli("evaluate", str(table), "--target", "income", "--out", "r.json", cwd=tmp_path))
    assert "--report (default: next to --out) 'r.json' is the same file as --out 'r.json'" in err


@pytest.mark.slow
def test_an_output_naming_a_hierarchy_input_is_refused(table, tmp_path):
    (tmp_path / "zip.csv").write_text("a;*\nb;*\nc;*\nd;*\ne;*\nf;*\n")
    err = _one_error_line(run_cli("anonymize", str(table), "--qi", "age,zip", "--k", "3", "--hierarchy",
                                  "zip=zip.csv", "--out", "o.csv", "--report", "zip.csv", cwd=tmp_path))
    assert "--report 'zip.csv' is the --hierarchy file of 'zip', which would be overwritten" in err


# ---------------------------------------------------------------------------- row 8: write failures
@pytest.mark.slow
@pytest.mark.parametrize("where", ["/proc", "/sys"])
def test_out_under_proc_or_sys_is_not_a_regular_place(tmp_path, where):
    err = _one_error_line(run_cli(*ADULT, "--out", f"{where}/o.csv", cwd=tmp_path))
    assert f"cannot write '{where}/o.csv'" in err and "not a regular place for files" in err


@pytest.mark.slow
def test_report_onto_a_pipe_is_refused(tmp_path):
    """A finished output is renamed over its path: a pipe or device there would be replaced."""
    os.mkfifo(tmp_path / "pipe.json")
    err = _one_error_line(run_cli(*ADULT, "--out", "o.csv", "--report", "pipe.json", cwd=tmp_path))
    assert "'pipe.json': it exists and is not a regular file" in err
    assert (tmp_path / "pipe.json").is_fifo() and not (tmp_path / "o.csv").exists()


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_leaves_nothing(tiny_disk, tmp_path):
    """Both outputs on a real full file system: the table's write fails (ENOSPC)."""
    before = _left(tiny_disk)
    err = _one_error_line(run_cli(*ADULT, "--out", str(tiny_disk / "o.csv"), "--report",
                                  str(tiny_disk / "o.json"), cwd=tmp_path))
    assert f"cannot write '{tiny_disk / 'o.csv'}': no space left on the device (ENOSPC)" in err
    assert _left(tiny_disk) == before


@pytest.mark.slow
def test_a_report_that_fails_after_the_table_leaves_no_table(tiny_disk, tmp_path):
    """The table fits its (ordinary) folder, the report does not fit the full disk: neither is left."""
    err = _one_error_line(run_cli(*ADULT, "--out", "o.csv", "--report", str(tiny_disk / "o.json"),
                                  "--html", "o.html", cwd=tmp_path))
    assert f"cannot write '{tiny_disk / 'o.json'}': no space left on the device" in err
    assert _left(tmp_path) == ["tiny"] and _left(tiny_disk) == ["filler"]


@pytest.mark.slow
def test_a_read_only_folder_is_named_before_any_work(tmp_path):
    ro = tmp_path / "ro"
    if os.geteuid() == 0:  # root writes through chmod: a read-only mount
        if not _mount_tmpfs(ro, "ro,size=64k"):
            pytest.skip("cannot mount a tmpfs here")
    else:
        ro.mkdir()
        ro.chmod(0o500)
    try:
        err = _one_error_line(run_cli(*ADULT, "--out", "o.csv", "--report", str(ro / "o.json"), cwd=tmp_path))
        assert f"cannot write '{ro / 'o.json'}'" in err
        assert "read-only" in err or "permission denied" in err
        assert not (tmp_path / "o.csv").exists()
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(ro)], capture_output=True)
        else:
            ro.chmod(0o700)


def test_an_oserror_while_writing_the_report_leaves_no_table(table, tmp_path, monkeypatch, capsys):
    """In-process stand-in for a disk that fills while the report is written (json.dump raises ENOSPC).
    It cannot catch what a real file system does differently (pyarrow's or pandas' own error texts):
    the tmpfs tests above do."""
    from gpuanon.cli import main

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(json, "dump", full)
    rc = main(["-q", "anonymize", str(table), "--qi", "age,zip", "--k", "3", "--out", str(tmp_path / "o.parquet"),
               "--report", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert f"cannot write '{tmp_path / 'o.json'}': no space left on the device (ENOSPC)" in err
    assert _left(tmp_path) == ["in.csv"]


def test_write_error_names_the_cause():
    from gpuanon.output.io import write_error

    e = write_error("x.csv", OSError("[Errno 28] Error writing bytes to file"))  # pyarrow's text, no errno
    assert str(e).startswith("cannot write 'x.csv': no space left on the device (ENOSPC)")
    assert "read-only" in str(write_error("x.csv", OSError(errno.EROFS, "Read-only file system")))
    assert "permission denied" in str(write_error("x.csv", PermissionError(errno.EACCES, "Permission denied")))


def test_a_failing_rename_leaves_none_of_the_outputs(tmp_path, monkeypatch):
    from gpuanon.errors import OutputError
    from gpuanon.output.io import Outputs

    outs = Outputs()
    outs.add("--out", tmp_path / "a.csv", table=True)
    outs.add("--report", tmp_path / "a.json")
    outs.check()
    real = os.replace
    calls = []

    def second_fails(a, b):
        calls.append(b)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error")
        return real(a, b)

    monkeypatch.setattr(os, "replace", second_fails)
    with pytest.raises(OutputError, match="a.json': input/output error"):
        with outs.writing() as w:
            w.table("--out", pd.DataFrame({"x": [1, 2]}))
            w.json("--report", {"x": 1})
    assert _left(tmp_path) == []


# ---------------------------------------------------------------------------- row 10: SIGTERM
_SLOW_WRITE = """
import sys, time
import gpuanon.output.io
orig = gpuanon.output.io.write_csv
def slow(df, path, *a, **k):
    r = orig(df, path, *a, **k)
    if str(path).endswith('.tmp'):
        time.sleep(120)
    return r
gpuanon.output.io.write_csv = slow
from gpuanon.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, word", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130,
                                                                                   "interrupted")])
def test_a_signal_during_the_write_leaves_no_temporary_file(tmp_path, sig, code, word):
    """The table's write is slowed by a hook (it sleeps after the CSV writer wrote the temporary file), so the
    signal lands while a temporary output exists. It cannot catch a signal inside pyarrow's C writer, which
    Python handles when that call returns: the same clean-up path."""
    env = dict(os.environ, GPUANON_BACKEND="cpu", PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-c", _SLOW_WRITE, *ADULT, "--out", "o.csv", "--report", "o.json"],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any(n.endswith(".tmp") and n.startswith(".o.csv.") for n in _left(tmp_path)):
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, (p.returncode, err)
    assert "Traceback" not in err and f"gpuanon: {word}" in err, err
    assert _left(tmp_path) == []


def test_csv_gz_reads_back_as_the_plain_csv(tmp_path, monkeypatch):
    """A ``.csv.gz`` output is the plain CSV's bytes once decompressed (written as gzip members, one per
    slice, in order): gzip, pandas and pyarrow read it whole."""
    import gzip

    import pyarrow.csv as pcsv

    from gpuanon.output import csv_out

    monkeypatch.setattr(csv_out, "_SLICE_ROWS", 7)  # many members
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x": rng.normal(size=50), "s": rng.choice(["a", "b,c", 'q"x', "0012"], 50),
                       "i": np.arange(50)})
    plain, packed = tmp_path / "o.csv", tmp_path / "o.csv.gz"
    csv_out.write_csv(df, plain, False)
    csv_out.write_csv(df, packed, True)
    raw = packed.read_bytes()
    assert raw.count(b"\x1f\x8b\x08") >= 8  # a member for the header and for each slice
    assert gzip.decompress(raw) == plain.read_bytes()
    pd.testing.assert_frame_equal(pd.read_csv(packed), pd.read_csv(plain))
    assert pcsv.read_csv(packed).num_rows == 50
