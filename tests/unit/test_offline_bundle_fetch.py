"""library/offline_bundle_fetch.py and module_utils/gpunode/bundle/fetch.py, against a local http.server.

The bundle's downloads in one module run: each file checked against its index's checksum and
renamed into place only then; a file already there with the checksum kept (a rerun changes
nothing); a mismatch, a 404 or a download that breaks off fails naming the file and keeps nothing
of it (no partial file, no temp file); check mode fetches nothing.
"""

import functools
import hashlib
import http.server
import threading

import offline_bundle_fetch
import pytest
from ansible.module_utils.gpunode.bundle import fetch
from ansible.module_utils.gpunode.bundle.packages_index import BundleError

FILES = {"a.rpm": b"first package\n" * 1000, "b.rpm": b"second package\n"}


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path != "/cut.rpm":
            return super().do_GET()
        self.send_response(200)  # says 1000 bytes, sends 10, hangs up
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.wfile.write(b"0123456789")
        self.close_connection = True
        return None


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    monkeypatch.setenv("no_proxy", "127.0.0.1")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    www = tmp_path_factory.mktemp("www")
    for name, data in FILES.items():
        (www / name).write_bytes(data)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(www)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def item(url, folder, name, data=None, algorithm="sha256"):
    data = FILES.get(name, b"") if data is None else data
    return {"url": f"{url}/{name}", "dest": str(folder / "rpms" / "repo" / name), "package": name[0],
            "checksum": f"{algorithm}:{hashlib.new(algorithm, data).hexdigest()}"}


def run(run_module, files, check_mode=False):
    return run_module(offline_bundle_fetch, {"files": files, "label": "repo: {package}"},
                      check_mode=check_mode)


def test_fetches_each_file_checked_and_a_rerun_keeps_them(run_module, served, tmp_path):
    files = [item(served, tmp_path, "a.rpm"), item(served, tmp_path, "b.rpm", algorithm="sha1")]
    ok, result = run(run_module, files)
    assert ok, result
    assert result["changed"] and result["fetched"] == [f["dest"] for f in files] and result["kept"] == []
    folder = tmp_path / "rpms" / "repo"
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == FILES
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in folder.iterdir())
    ok, result = run(run_module, files)
    assert ok and not result["changed"] and result["kept"] == [f["dest"] for f in files]


def test_a_file_there_with_another_checksum_is_fetched_again(run_module, served, tmp_path):
    files = [item(served, tmp_path, "a.rpm"), item(served, tmp_path, "b.rpm")]
    for path, data in ((files[0]["dest"], FILES["a.rpm"]), (files[1]["dest"], b"half of it")):
        (tmp_path / "rpms" / "repo").mkdir(parents=True, exist_ok=True)
        (tmp_path / "rpms" / "repo" / path.rsplit("/", 1)[-1]).write_bytes(data)
    ok, result = run(run_module, files)
    assert ok and result["kept"] == [files[0]["dest"]] and result["fetched"] == [files[1]["dest"]]
    assert (tmp_path / "rpms" / "repo" / "b.rpm").read_bytes() == FILES["b.rpm"]


def test_check_mode_fetches_nothing_and_lists_what_it_would(run_module, served, tmp_path):
    files = [item(served, tmp_path, "a.rpm")]
    ok, result = run(run_module, files, check_mode=True)
    assert ok and result["changed"] and result["fetched"] == [files[0]["dest"]]
    assert not (tmp_path / "rpms").exists()


def test_a_mismatch_fails_naming_the_file_and_keeps_nothing_of_it(run_module, served, tmp_path):
    files = [item(served, tmp_path, "a.rpm"), item(served, tmp_path, "b.rpm", data=b"what the index says")]
    folder = tmp_path / "rpms" / "repo"
    folder.mkdir(parents=True)
    (folder / "b.rpm").write_bytes(b"an earlier state")
    ok, result = run(run_module, files)
    assert not ok
    assert result["msg"].startswith(f"repo: b: {served}/b.rpm: its sha256 ")
    assert "did not match" in result["msg"] and files[1]["dest"] in result["msg"]
    assert result["fetched"] == [files[0]["dest"]]  # the file before it stays, checked
    assert sorted(p.name for p in folder.iterdir()) == ["a.rpm", "b.rpm"]  # no temp file
    assert (folder / "b.rpm").read_bytes() == b"an earlier state"


@pytest.mark.parametrize(("name", "message"), [
    ("cut.rpm", "the download broke off"), ("missing.rpm", "cannot be fetched: HTTP Error 404"),
])
def test_a_broken_download_leaves_no_partial_file(served, tmp_path, name, message):
    files = [item(served, tmp_path, name, data=b"0123456789" * 100)]
    with pytest.raises(BundleError, match=f"^x: {served}/{name}.*{message}"):
        list(fetch.fetch_all(files, "x"))
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


@pytest.mark.parametrize(("change", "label", "message"), [
    ({"checksum": "crc32:00"}, "{package}", r"^a: no checksum 'crc32:00' as ALGORITHM:HEX"),
    ({"url": ""}, "{package}", r"^a: no url in"),
    ({"checksum": "sha256:"}, "{package}", r"^a: no checksum 'sha256:' as"),
    ({}, "{version}", r"^label '\{version\}': no 'version' in"),
])
def test_an_item_without_a_url_dest_checksum_or_label_key_is_refused(tmp_path, change, label, message):
    with pytest.raises(BundleError, match=message):
        list(fetch.fetch_all([dict(item("http://x", tmp_path, "a.rpm"), **change)], label))
