"""The foundations stay in their rooms: ``bench/tools/move_rooms.py --check`` finds nothing left to
move or rewrite (a merged branch's import of an old path, ``gpuanon.io`` say, fails here: run
``python bench/tools/move_rooms.py`` from the repository root), and its rewriting of imports is
checked on hand-written lines."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "tools"))

import move_rooms  # noqa: E402


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_nothing_is_left_at_the_old_paths():
    got = subprocess.run([sys.executable, "bench/tools/move_rooms.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True)
    assert got.returncode == 0, got.stdout + got.stderr


@pytest.mark.parametrize("path, line, want", [
    ("gpuanon/cli/common.py", "from ..io import Outputs  # noqa: PLC0415", "from ..output.io import Outputs  # noqa: PLC0415"),
    ("gpuanon/anonymize/x.py", "from .. import cells, verify", "from ..table import cells\nfrom ..release import verify"),
    ("tests/t.py", "from gpuanon import schema as S", "from gpuanon.table import schema as S"),
    ("tests/t.py", "import gpuanon.io as gio", "import gpuanon.output.io as gio"),
    ("gpuanon/distributed/x.py", "from .tasks import Runner, backend_of",
     "from ..cluster.runner import Runner\nfrom .tasks import backend_of"),
    ("gpuanon/output/io.py", "from .errors import OutputError", "from ..errors import OutputError"),  # written for gpuanon/io.py
    ("gpuanon/output/io.py", "from .jsonsafe import json_safe", "from .jsonsafe import json_safe"),
    ("gpuanon/anonymize/x.py", "from ..backend import to_host", "from ..backend import to_host"),
])
def test_imports_are_rewritten_for_the_new_rooms(path, line, want):
    assert move_rooms.rewrite_imports(path, line + "\n") == want + "\n"


def test_dotted_names_and_paths_are_rewritten_once():
    text = 'mock.patch("gpuanon.io.atomic_path"); see gpuanon/verify.py and distributed/cluster.py; gpuanon.attack.cells\n'
    want = ('mock.patch("gpuanon.output.io.atomic_path"); see gpuanon/release/verify.py and cluster/connect.py; '
            'gpuanon.attack.cells\n')
    assert move_rooms.rewrite_text("docs/x.md", text) == want
    assert move_rooms.rewrite_text("docs/x.md", want) == want


def test_paths_joined_in_python_are_rewritten():
    text = 'tree = ast.parse((ROOT / "gpuanon" / "verify.py").read_text())\n'
    want = 'tree = ast.parse((ROOT / "gpuanon" / "release" / "verify.py").read_text())\n'
    assert move_rooms.rewrite_text("tests/t.py", text) == want
    assert move_rooms.rewrite_text("tests/t.py", want) == want
