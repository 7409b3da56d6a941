"""The wheels a lent GPU machine needs beyond its image, and how they travel (``bench/device_run.sh``).

A device call carries the working tree plus at most 64 MiB of ignored paths; the machine has no
network. The core set (Dask, distributed, Dask-CUDA and what they need beyond the image) rides in
``.whl/`` with the run itself. cuDF for CUDA 13 (about 338 MiB) travels as a deterministic tar split
into parts (``--split``), one part per call (``stage``), kept in ``/tmp`` while the machine stays
warm; the run reassembles the parts and checks every SHA-256 before it installs anything.

Subcommands (stdlib only; ``fetch`` needs pip and the network)::

    plan                         what each call carries, with sizes (from bench/device_wheels.txt)
    fetch [core|cudf|all] [--relock]   download exactly the locked wheels (Python 3.12 manylinux x86-64)
    split [--parts 6]            .whl-cudf/wheels/*.whl -> .whl-cudf/cudf.part1..N + cudf.sha256
    stage                        (device) copy the carried parts into the stage folder, checked
    assemble                     (device) all parts -> the stage's wheels/, checked; exit 3 if one is missing
    install TARGET WHEEL...      pip install --no-index --no-deps --target (unzip when pip is absent)
    versions                     the versions in use and the int64 ``cupy.add.at`` probe, as JSON
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK = os.path.join(REPO, "bench", "device_wheels.txt")
CORE_DIR = os.path.join(REPO, ".whl")
CUDF_DIR = os.path.join(REPO, ".whl-cudf")
STAGE = os.environ.get("GPUANON_CUDF_STAGE", "/tmp/gpuanon_cudf")
MIB = 1 << 20
CALL_LIMIT = 64 * MIB  # the working tree plus the carried paths, per device call
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64"]


def read_lock(path: str | None = None) -> list[dict]:
    rows = []
    with open(path or LOCK) as fh:
        for line in fh:
            if line.strip() and not line.lstrip().startswith("#"):
                kind, req, name, size, sha = line.split()
                rows.append({"set": kind, "requirement": req, "file": name, "bytes": int(size), "sha256": sha})
    return rows


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def tree_bytes(root: str = REPO) -> int:
    """Bytes of what travels with every call besides ``carry``: tracked and untracked-not-ignored files."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return 0
    paths = {p for p in out.decode().split("\0") if p}
    return sum(os.path.getsize(os.path.join(root, p)) for p in paths if os.path.isfile(os.path.join(root, p)))


def _mib(n: int) -> str:
    return f"{n / MIB:.1f} MiB"


def plan(parts: int = 6) -> int:
    rows, tree = read_lock(), tree_bytes()
    core = [r for r in rows if r["set"] == "core"]
    print(f"working tree (travels with every call): {_mib(tree)}")
    print("core: carry ['.whl'] with the run call; installed with pip --no-index --no-deps --target")
    for r in core:
        have = os.path.isfile(os.path.join(CORE_DIR, r["file"]))
        print(f"  {r['requirement']:<34} {_mib(r['bytes']):>10}  {'fetched' if have else 'not fetched'}")
    wheels = sum(r["bytes"] for r in core)
    print(f"  .whl: {_mib(wheels)}")
    print(f"carry: {(tree + wheels) / MIB:.1f} MiB (working tree + .whl; the limit is 64)")
    cudf = [r for r in rows if r["set"] == "cudf"]
    total = sum(r["bytes"] for r in cudf)
    print(f"cudf: {len(cudf)} wheels, {_mib(total)}, as {parts} parts of a tar, one part per call "
          f"(each with the working tree: at most {_mib(CALL_LIMIT)})")
    for r in cudf:
        have = os.path.isfile(os.path.join(CUDF_DIR, "wheels", r["file"]))
        print(f"  {r['requirement']:<34} {_mib(r['bytes']):>10}  {'fetched' if have else 'not fetched'}")
    manifest = os.path.join(CUDF_DIR, "cudf.sha256")
    if os.path.isfile(manifest):
        for sha, name in _manifest(manifest):
            path = os.path.join(CUDF_DIR, name)
            size = os.path.getsize(path) if os.path.isfile(path) else None
            fit = "" if size is None else f", call {_mib(size + tree)}"
            print(f"  {name:<12} {_mib(size) if size is not None else 'absent':>10}  sha256 {sha}{fit}")
    else:
        print(f"  parts: not made yet (bash bench/device_run.sh --fetch cudf && bash bench/device_run.sh --split); "
              f"about {_mib(-(-total // parts))} each")
    return 0


def _manifest(path: str) -> list[tuple[str, str]]:
    with open(path) as fh:
        return [tuple(line.split()) for line in fh if line.strip()]


def fetch(which: str, relock: bool, python: str = sys.executable) -> int:
    rows = read_lock()
    sets = {"core", "cudf"} if which == "all" else {which}
    bad = []
    for r in rows:
        if r["set"] not in sets:
            continue
        dest = CORE_DIR if r["set"] == "core" else os.path.join(CUDF_DIR, "wheels")
        os.makedirs(dest, exist_ok=True)
        path = os.path.join(dest, r["file"])
        if not (os.path.isfile(path) and os.path.getsize(path) == r["bytes"] and sha256(path) == r["sha256"]):
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                       "--implementation", "cp", "--abi", "cp312", "--abi", "abi3", "--abi", "none", "-q", "-d", tmp]
                for plat in PLATFORMS:
                    cmd += ["--platform", plat]
                p = subprocess.run(cmd + [r["requirement"]], capture_output=True, text=True)
                got = [f for f in os.listdir(tmp) if f.endswith(".whl")]
                if p.returncode or len(got) != 1:
                    bad.append(f"{r['requirement']}: pip download failed: {p.stderr.strip()[-300:]}")
                    continue
                if relock:
                    r["file"] = got[0]
                path = os.path.join(dest, r["file"])
                shutil.move(os.path.join(tmp, got[0]), path)
        size, digest = os.path.getsize(path), sha256(path)
        if relock:
            r["bytes"], r["sha256"] = size, digest
        elif (size, digest) != (r["bytes"], r["sha256"]):
            bad.append(f"{r['file']}: {size} bytes sha256 {digest}, the lock says {r['bytes']} / {r['sha256']}")
            continue
        print(f"ok {r['file']} {_mib(size)}")
    for s in sets:  # exactly the locked files: anything else in the folder would be installed too
        folder = CORE_DIR if s == "core" else os.path.join(CUDF_DIR, "wheels")
        keep = {r["file"] for r in rows if r["set"] == s}
        for f in os.listdir(folder) if os.path.isdir(folder) else []:
            if f.endswith(".whl") and f not in keep:
                os.remove(os.path.join(folder, f))
                print(f"removed {f} (not in bench/device_wheels.txt)")
    if relock:
        _relock(rows)
    for b in bad:
        print(f"error: {b}", file=sys.stderr)
    return 1 if bad else 0


def _relock(rows: list[dict]) -> None:
    by_req = {(r["set"], r["requirement"]): r for r in rows}
    lines = []
    with open(LOCK) as fh:
        for line in fh:
            if line.strip() and not line.lstrip().startswith("#"):
                r = by_req[tuple(line.split()[:2])]
                line = f"{r['set']} {r['requirement']} {r['file']} {r['bytes']} {r['sha256']}\n"
            lines.append(line)
    with open(LOCK, "w") as fh:
        fh.writelines(lines)


def split(parts: int) -> int:
    """A deterministic tar of the cuDF wheels (sorted, mtime 0, owner 0) cut into ``parts`` byte ranges."""
    cudf = [r for r in read_lock() if r["set"] == "cudf"]
    src = os.path.join(CUDF_DIR, "wheels")
    missing = [r["file"] for r in cudf if not os.path.isfile(os.path.join(src, r["file"]))]
    if missing:
        print(f"error: not fetched: {', '.join(missing)} (run: bash bench/device_run.sh --fetch cudf)", file=sys.stderr)
        return 1
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for r in sorted(cudf, key=lambda r: r["file"]):
            info = tar.gettarinfo(os.path.join(src, r["file"]), arcname=f"wheels/{r['file']}")
            info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
            with open(os.path.join(src, r["file"]), "rb") as fh:
                tar.addfile(info, fh)
    data = buf.getvalue()
    step = -(-len(data) // parts)
    for old in os.listdir(CUDF_DIR):
        if old.startswith("cudf.part"):
            os.remove(os.path.join(CUDF_DIR, old))
    lines, tree, over = [], tree_bytes(), []
    for i in range(parts):
        name = f"cudf.part{i + 1}"
        chunk = data[i * step:(i + 1) * step]
        with open(os.path.join(CUDF_DIR, name), "wb") as fh:
            fh.write(chunk)
        lines.append(f"{hashlib.sha256(chunk).hexdigest()}  {name}\n")
        if len(chunk) + tree + 4096 > CALL_LIMIT:
            over.append(name)
    lines.append(f"{hashlib.sha256(data).hexdigest()}  cudf.tar\n")
    with open(os.path.join(CUDF_DIR, "cudf.sha256"), "w") as fh:
        fh.writelines(lines)
    print(f"cudf.tar {_mib(len(data))} -> {parts} parts of at most {_mib(step)}; manifest .whl-cudf/cudf.sha256")
    if over:
        print(f"error: {', '.join(over)} plus the working tree ({_mib(tree)}) exceed 64 MiB: use --parts "
              f"{parts + 1}", file=sys.stderr)
        return 1
    return 0


def stage() -> int:
    """On the device: copy the parts this call carried into the stage folder, each checked."""
    os.makedirs(STAGE, exist_ok=True)
    manifest = os.path.join(CUDF_DIR, "cudf.sha256")
    if not os.path.isfile(manifest):
        print("error: no .whl-cudf/cudf.sha256 in this call (carry it with the part)", file=sys.stderr)
        return 1
    want = dict((name, sha) for sha, name in _manifest(manifest))
    shutil.copyfile(manifest, os.path.join(STAGE, "cudf.sha256"))
    copied = []
    for name in sorted(os.listdir(CUDF_DIR)):
        if name.startswith("cudf.part"):
            if sha256(os.path.join(CUDF_DIR, name)) != want.get(name):
                print(f"error: {name} does not match its SHA-256 in cudf.sha256", file=sys.stderr)
                return 1
            shutil.copyfile(os.path.join(CUDF_DIR, name), os.path.join(STAGE, name))
            copied.append(name)
    have = sorted(n for n in want if n.startswith("cudf.part") and os.path.isfile(os.path.join(STAGE, n)))
    print(f"staged {', '.join(copied) or 'nothing'}; {STAGE} holds {len(have)} of "
          f"{sum(n.startswith('cudf.part') for n in want)} parts")
    return 0


def assemble() -> int:
    """On the device: every part present and matching -> the cuDF wheels in STAGE/wheels (exit 3 if not)."""
    manifest = os.path.join(STAGE, "cudf.sha256")
    if not os.path.isfile(manifest):
        print(f"cudf: no parts staged in {STAGE}", file=sys.stderr)
        return 3
    want = _manifest(manifest)
    h, data = hashlib.sha256(), bytearray()
    for sha, name in want:
        if name == "cudf.tar":
            continue
        path = os.path.join(STAGE, name)
        if not os.path.isfile(path):
            print(f"cudf: {name} is missing from {STAGE}", file=sys.stderr)
            return 3
        with open(path, "rb") as fh:
            chunk = fh.read()
        if hashlib.sha256(chunk).hexdigest() != sha:
            print(f"cudf: {name} does not match its SHA-256", file=sys.stderr)
            return 3
        h.update(chunk)
        data += chunk
    total = dict((n, s) for s, n in want)["cudf.tar"]
    if h.hexdigest() != total:
        print("cudf: the reassembled tar does not match its SHA-256", file=sys.stderr)
        return 3
    with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
        tar.extractall(STAGE, filter="data")
    print(f"cudf: {len(want) - 1} parts verified, wheels in {STAGE}/wheels")
    return 0


def install(target: str, wheels: list[str]) -> int:
    os.makedirs(target, exist_ok=True)
    have_pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0
    if have_pip:
        p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                            "--no-cache-dir", "--upgrade", "--target", target, *wheels])
        if p.returncode:
            return p.returncode
    else:  # a wheel is a zip laid out for site-packages
        for w in wheels:
            with zipfile.ZipFile(w) as z:
                z.extractall(target)
    print(f"installed {len(wheels)} wheels into {target}")
    return 0


def versions() -> int:
    """Versions in use (where each was imported from) and the int64 scatter-add probe, as JSON."""
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for dist in ("numpy", "pandas", "pyarrow", "scipy", "scikit-learn", "cupy-cuda13x", "cupy-cuda12x", "cudf-cu13",
                 "numba", "numba-cuda", "cuda-core", "cuda-bindings", "dask", "distributed", "dask-cuda", "pytest",
                 "pytest-timeout"):
        try:
            d = metadata.distribution(dist)
            out[dist] = f"{d.version} ({d.locate_file('')})"
        except metadata.PackageNotFoundError:
            out[dist] = None
    try:
        import cupy

        a = cupy.zeros(4, dtype=cupy.int64)
        cupy.add.at(a, cupy.asarray([0, 1, 1, 3]), cupy.asarray([5, 1, 2, 2**40], dtype=cupy.int64))
        got = a.get().tolist()
        out["add_at_int64"] = {"ok": got == [5, 3, 0, 2**40], "got": got}
    except Exception as exc:  # the probe's failure is the finding
        out["add_at_int64"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    print(json.dumps(out, indent=1))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("plan").add_argument("--parts", type=int, default=6)
    f = sub.add_parser("fetch")
    f.add_argument("which", nargs="?", default="core", choices=["core", "cudf", "all"])
    f.add_argument("--relock", action="store_true")
    sub.add_parser("split").add_argument("--parts", type=int, default=6)
    sub.add_parser("stage")
    sub.add_parser("assemble")
    i = sub.add_parser("install")
    i.add_argument("target")
    i.add_argument("wheels", nargs="+")
    sub.add_parser("versions")
    a = ap.parse_args(argv)
    if a.cmd == "plan":
        return plan(a.parts)
    if a.cmd == "fetch":
        return fetch(a.which, a.relock)
    if a.cmd == "split":
        return split(a.parts)
    if a.cmd == "install":
        return install(a.target, a.wheels)
    return {"stage": stage, "assemble": assemble, "versions": versions}[a.cmd]()


if __name__ == "__main__":
    sys.exit(main())
