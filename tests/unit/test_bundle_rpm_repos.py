"""bundle/rpm_repos.py: from a repository's fetched repomd.xml to the exact .rpm files, checked.

The metadata is written here in the formats createrepo_c and modifyrepo_c write
(test_bundle_rpm_index's builders), compressed as they compress it, with the checksums
repomd.xml gives; a file whose checksum differs, a package the repository lacks and a
compression the standard library cannot read are refused, naming the repository.
"""

import gzip
import hashlib
import lzma

import pytest
from ansible.module_utils.gpunode.bundle import rpm_repos
from ansible.module_utils.gpunode.bundle.packages_index import BundleError
from test_bundle_rpm_index import modules_yaml, primary_xml, rpm

URL = "http://mirror.example/cuda/rhel9/x86_64/"
SOURCE = r"^cuda-rhel-9-x86_64 \(http://mirror\.example/cuda/rhel9/x86_64/\): "
PACKAGES = [rpm(name, version, epoch="3", requires=requires) for version in ("570.172.08", "580.95.05")
            for name, requires in (("nvidia-open", [f"nvidia-driver = 3:{version}"]), ("nvidia-driver", []))]
STREAMS = [("nvidia-driver", f"{branch}-open", 1,
            [f"nvidia-open-3:{v}-1.el9.x86_64", f"nvidia-driver-3:{v}-1.el9.x86_64"], ["nvidia-open"])
           for branch, v in (("570", "570.172.08"), ("580", "580.95.05"))]


def repository(**request):
    return {"name": "cuda-rhel-9-x86_64", "url": URL, "arch": "x86_64", "format": "rpm",
            "requests": [request] if request else [], "packages": request.get("packages", [])}


def write_repodata(folder, primary, modules=None, *, checksum_of=None):
    """repomd.xml naming ``primary`` (and ``modules``), as fetched into ``folder``."""
    rows = []
    for kind, name, data in (("primary", "primary.xml.gz", primary), ("modules", "modules.yaml.xz", modules)):
        if data is None:
            continue
        digest = hashlib.sha256((checksum_of or {}).get(kind, data)).hexdigest()
        (folder / f"{digest}-{name}").write_bytes(data)
        rows.append(f'<data type="{kind}"><checksum type="sha256">{digest}</checksum>'
                    f'<location href="repodata/{digest}-{name}"/></data>')
    (folder / "repomd.xml").write_text('<repomd xmlns="http://linux.duke.edu/metadata/repo">'
                                       + "".join(rows) + "</repomd>")


@pytest.fixture
def repodata(tmp_path):
    write_repodata(tmp_path, gzip.compress(primary_xml(PACKAGES).encode()),
                   lzma.compress(modules_yaml(STREAMS).encode()))
    return tmp_path


def test_repomd_names_the_metadata_to_fetch_with_its_checksums(repodata):
    files = rpm_repos.metadata_files(repository(), str(repodata))
    assert [(f["type"], f["url"].startswith(URL + "repodata/"), f["checksum"].startswith("sha256:"))
            for f in files] == [("primary", True, True), ("modules", True, True)]
    for entry in files:
        data = (repodata / entry["dest"].rsplit("/", 1)[-1]).read_bytes()
        assert entry["checksum"] == "sha256:" + hashlib.sha256(data).hexdigest()


def test_each_nodes_stream_is_resolved_apart_and_the_modules_kept(repodata):
    repo = repository(packages=["nvidia-open"], module_streams=["nvidia-driver:570-open"])
    repo["requests"].append({"packages": ["nvidia-open"], "module_streams": ["nvidia-driver:580-open"]})
    rpms, modules = rpm_repos.rpm_downloads(repo, str(repodata), "/b/rpms/cuda-rhel-9-x86_64")
    assert sorted((r["package"], r["version"]) for r in rpms) == [
        ("nvidia-driver", "570.172.08-1.el9"), ("nvidia-driver", "580.95.05-1.el9"),
        ("nvidia-open", "570.172.08-1.el9"), ("nvidia-open", "580.95.05-1.el9")]
    assert all(r["dest"].startswith("/b/rpms/cuda-rhel-9-x86_64/") and r["url"].startswith(URL) for r in rpms)
    assert modules.endswith("-modules.yaml.xz")


def test_metadata_whose_checksum_differs_is_refused_naming_the_repository(tmp_path):
    primary = gzip.compress(primary_xml(PACKAGES).encode())
    write_repodata(tmp_path, primary, checksum_of={"primary": b"another state of the repository"})
    with pytest.raises(BundleError, match=SOURCE + r".*-primary\.xml\.gz: its sha256 is not the [0-9a-f]{64} "
                                          r"repodata/repomd\.xml gives"):
        rpm_repos.rpm_downloads(repository(packages=["nvidia-open"]), str(tmp_path), "/b")


def test_a_package_the_repository_lacks_is_refused_naming_repository_and_package(repodata):
    repo = repository(packages=["nvidia-open-590.44.01"], module_streams=["nvidia-driver:580-open"])
    problem = r"no package for x86_64 matches 'nvidia-open-590\.44\.01' with nvidia-driver:580-open enabled"
    with pytest.raises(BundleError, match=SOURCE + problem):
        rpm_repos.rpm_downloads(repo, str(repodata), "/b")


def test_a_stream_of_a_repository_without_modules_is_refused(tmp_path):
    write_repodata(tmp_path, gzip.compress(primary_xml(PACKAGES).encode()))
    repo = repository(packages=["nvidia-open"], module_streams=["nvidia-driver:580-open"])
    problem = r"no module stream nvidia-driver:580-open for x86_64 \(streams there: none\)"
    with pytest.raises(BundleError, match=SOURCE + problem):
        rpm_repos.rpm_downloads(repo, str(tmp_path), "/b")


def test_missing_metadata_and_zstd_are_refused_saying_what_to_do(tmp_path):
    with pytest.raises(BundleError, match=r"repomd\.xml is missing \(repodata/repomd\.xml not fetched\)"):
        rpm_repos.metadata_files(repository(), str(tmp_path))
    with pytest.raises(BundleError, match=r"^x: zstd-compressed metadata.*createrepo_c --compress-type=gz"):
        rpm_repos.decompress(b"\x28\xb5\x2f\xfd" + b"\0" * 8, "x")
    assert rpm_repos.decompress(b"<metadata/>", "x") == b"<metadata/>"


@pytest.mark.parametrize("data", [gzip.compress(b"<metadata/>")[:-6], lzma.compress(b"<metadata/>")[:-6]],
                         ids=["gzip", "xz"])
def test_a_broken_compressed_file_is_refused_naming_it(data):
    with pytest.raises(BundleError, match=r"^cuda/primary\.xml\.gz: a broken (gzip|xz) file"):
        rpm_repos.decompress(data, "cuda/primary.xml.gz")


def test_gather_reads_the_rpm_repositories_it_is_given_folders_for(repodata):
    repo = repository(packages=["nvidia-open"], module_streams=["nvidia-driver:580-open"])
    deb = {"name": "toolkit-amd64", "format": "deb", "url": "http://mirror.example/deb/"}
    other = dict(repo, name="cuda-rhel-10-x86_64")  # no folder given: not read
    folders = {"cuda-rhel-9-x86_64": str(repodata), "toolkit-amd64": str(repodata)}
    listed = rpm_repos.gather([deb, repo, other], folders, "/b")
    assert [f["type"] for f in listed["rpm_metadata"]] == ["primary", "modules"]
    assert (listed["rpms"], listed["rpm_modules"]) == ([], {})  # without resolve: the metadata only
    resolved = rpm_repos.gather([deb, repo, other], folders, "/b", resolve=True)
    assert [(r["package"], r["dest"].rsplit("/", 2)[-2]) for r in resolved["rpms"]] == [
        ("nvidia-driver", "cuda-rhel-9-x86_64"), ("nvidia-open", "cuda-rhel-9-x86_64")]
    assert list(resolved["rpm_modules"]) == ["cuda-rhel-9-x86_64"]
