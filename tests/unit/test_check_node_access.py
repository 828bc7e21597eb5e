"""scripts/check_node_access.py: `make lint` fails node access outside module_utils/gpunode/host/."""

import pytest
from conftest import ROOT, load_file

pytestmark = pytest.mark.controller(reason="a project check run by make lint on the controller")


@pytest.fixture(scope="module")
def check():
    return load_file(ROOT / "scripts" / "check_node_access.py", "check_node_access")


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("open('/etc/x')", "open"),
        ("import io\nio.open('/etc/x')", "io.open"),
        ("import gzip\ngzip.open('/x.gz')", "gzip.open"),
        ("import os\nos.listdir('/etc')", "os.listdir"),
        ("import os\nos.unlink('/etc/x')", "os.unlink"),
        ("import os\nos.execvp('ls', ['ls'])", "os.execvp"),
        ("import os\nos.path.exists('/etc/x')", "os.path.exists"),
        ("import os.path\nos.path.isdir('/etc')", "os.path.isdir"),
        ("import os.path as osp\nosp.realpath('/etc')", "os.path.realpath"),
        ("from os import path\npath.isfile('/etc/x')", "os.path.isfile"),
        ("from os import path as p\np.getmtime('/etc/x')", "os.path.getmtime"),
        ("from os.path import exists as there\nthere('/etc/x')", "os.path.exists"),
        ("from os import stat\nstat('/etc/x')", "os.stat"),
        ("import posixpath\nposixpath.islink('/etc/x')", "os.path.islink"),
        ("import glob\nglob.glob('/etc/*')", "glob.glob"),
        ("from glob import glob\nglob('/etc/*')", "glob.glob"),
        ("import shutil\nshutil.copy('/a', '/b')", "shutil.copy"),
        ("import subprocess as sp\nsp.run(['ls'])", "subprocess.run"),
        ("import tempfile\ntempfile.mkstemp()", "tempfile.mkstemp"),
        ("from pathlib import Path\nPath('/etc/x').read_text()", "pathlib.Path"),
        ("import os\ndef f(exists=os.path.exists):\n    return exists", "os.path.exists"),
    ],
)
def test_a_call_planted_in_library_fails_naming_file_line_and_call(check, tmp_path, capsys, source, name):
    planted = tmp_path / "library" / "m.py"
    planted.parent.mkdir()
    planted.write_text("# a module\n" + source + "\n")
    assert check.main([str(tmp_path)]) == 1
    line = next(i for i, text in enumerate(source.splitlines(), 2) if "(" in text and "import" not in text)
    out = capsys.readouterr().out
    assert out.startswith(f"{planted}:{line}: {name} touches the node")
    assert out.count("\n") == 1


@pytest.mark.parametrize("function", ["abspath", "basename", "commonpath", "commonprefix", "dirname", "isabs",
                                      "join", "normcase", "normpath", "relpath", "split", "splitdrive",
                                      "splitext", "sep"])
def test_each_pure_os_path_function_passes(check, tmp_path, function):
    source = f"import os\nfrom os import path\nos.path.{function}('/a')\npath.{function}\n"
    (tmp_path / "m.py").write_text(source)
    assert check.main([str(tmp_path)]) == 0


def test_string_and_process_state_and_the_host_layer_pass(check, tmp_path):
    (tmp_path / "m.py").write_text(
        "import os\nos.environ.get('X'); os.getpid(); os.uname(); os.X_OK; os.sep\n"
        "from ansible.module_utils.gpunode.host.files import exists, glob, listdir\n"
        "exists('/x'); glob('/x/*'); listdir('/x')\n"
    )
    host = tmp_path / "module_utils" / "gpunode" / "host"
    host.mkdir(parents=True)
    (host / "files.py").write_text("import os\nopen('/x'); os.unlink('/x')\n")
    assert check.main([str(tmp_path)]) == 0


def test_the_code_that_ships_touches_the_node_only_through_the_host_layer(check, capsys):
    assert check.main([]) == 0, capsys.readouterr().out
