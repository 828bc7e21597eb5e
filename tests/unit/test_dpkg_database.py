"""module_utils/gpunode/host/packages.py: dpkg's database as the driver role reads it."""

from ansible.module_utils.gpunode.host.packages import (
    exact_depends,
    installed,
    interrupted,
    journal_entries,
    parse_dpkg_query,
    parse_madison,
    version_known,
)

QUERY = (
    "dkms\t3.0.10-8+deb12u1\tinstall ok installed\n"
    "nvidia-driver\t535.129.03-1\thold ok installed\n"
    "nvidia-dkms-535-server\t535.129.03-0ubuntu1\tinstall ok half-configured\n"
    "nvidia-headless-535-server\t\tdeinstall ok config-files\n"
    "libnvidia-compute-535-server:amd64\t535.129.03-0ubuntu1\tinstall ok installed\n"
    "garbage line\n"
)


def test_dpkg_query_lines():
    packages = parse_dpkg_query(QUERY)
    assert packages["nvidia-driver"] == {"version": "535.129.03-1", "want": "hold", "status": "installed"}
    assert packages["libnvidia-compute-535-server"]["version"] == "535.129.03-0ubuntu1"  # :arch dropped
    assert installed(packages, "dkms") == "3.0.10-8+deb12u1"
    assert installed(packages, "nvidia-headless-535-server") is None  # only its configuration is left
    assert installed(packages, "cuda-drivers") is None
    assert "garbage line" not in packages


def test_an_interrupted_run_is_seen_in_the_journal_and_in_unfinished_packages(tmp_path):
    (tmp_path / "updates").mkdir()
    packages = parse_dpkg_query(QUERY)
    assert interrupted(packages, str(tmp_path)) == [
        "packages left unfinished: nvidia-dkms-535-server (half-configured)"]
    (tmp_path / "updates" / "0003").write_text("Package: dkms\n")
    (tmp_path / "updates" / "tmp.i").write_text("")  # dpkg's temporary file is not an entry
    assert journal_entries(str(tmp_path)) == ["0003"]
    assert interrupted({}, str(tmp_path)) == [f"dpkg was interrupted (1 journal entry in {tmp_path}/updates)"]
    assert journal_entries(str(tmp_path / "nowhere")) == []


def test_madison_says_which_versions_the_index_knows():
    text = (" nvidia-headless-570-server | 570.133.20-0ubuntu1 | http://127.0.0.1:8391  Packages\n"
            " nvidia-headless-570-server | 570.124.06-0ubuntu1 | http://127.0.0.1:8391  Packages\n"
            "    nvidia-driver | 1:535.129.03-1~deb12u1 | http://deb.debian.org/debian bookworm/non-free "
            "amd64 Packages\n")
    known = parse_madison(text)
    assert known["nvidia-headless-570-server"] == ["570.133.20-0ubuntu1", "570.124.06-0ubuntu1"]
    assert version_known(known, "nvidia-headless-570-server", "570.124.06")
    assert not version_known(known, "nvidia-headless-570-server", "570.86.10")
    assert version_known(known, "nvidia-driver", "535.129.03")  # an epoch does not hide the version
    assert not version_known(known, "cuda-drivers-570")
    assert version_known(known, "nvidia-driver")


# apt-cache show nvidia-open-570 nvidia-tesla-570-driver nvidia-tesla-570-open-kernel-dkms: every version
# the repository holds (the newest first), as dpkg-scanpackages writes them
SHOW = """Package: nvidia-open-570
Version: 570.133.20-0ubuntu1
Depends: nvidia-headless-570-server-open (= {new}), nvidia-utils-570-server (= {new})
Description: NVIDIA open driver metapackage
 a continuation line: (= {old})

Package: nvidia-open-570
Version: 570.124.06-0ubuntu1
Pre-Depends: nvidia-kernel-common-570:amd64 (= {old})
Depends: nvidia-headless-570-server-open (= {old}), nvidia-utils-570-server (= {old}),
 dkms, libc6 (>= 2.34), nvidia-firmware-570 (>= 570.124.06), nvidia-compute-utils-570-server (= {old})
Description: NVIDIA open driver metapackage

Package: nvidia-tesla-570-driver
Version: 570.124.06-0ubuntu1
Depends: nvidia-dkms-570-server (= {old}) | nvidia-dkms-570-server-open (= {old})

Package: nvidia-tesla-570-open-kernel-dkms
Version: 570.124.06-0ubuntu1
Depends: nvidia-dkms-570-server-open (= {old})
""".format(old="570.124.06-0ubuntu1", new="570.133.20-0ubuntu1")


def test_exact_depends_names_what_a_version_needs_at_that_very_version():
    """apt takes a dependency's newest version: an older exact one must be asked for."""
    assert exact_depends(SHOW, "570.124.06") == [  # a folded Depends line read whole
        "nvidia-compute-utils-570-server", "nvidia-dkms-570-server-open", "nvidia-headless-570-server-open",
        "nvidia-kernel-common-570", "nvidia-utils-570-server"]
    assert exact_depends(SHOW, "570.133.20") == ["nvidia-headless-570-server-open", "nvidia-utils-570-server"]
    assert exact_depends(SHOW, "570.86.10") == [] and exact_depends("", "570.124.06") == []


def test_exact_depends_takes_the_first_of_alternatives_none_of_which_is_named():
    tesla = "Package: nvidia-tesla-570-driver" + SHOW.split("Package: nvidia-tesla-570-driver")[1]
    tesla = tesla.split("\n\n", maxsplit=1)[0]
    assert exact_depends(tesla, "570.124.06") == ["nvidia-dkms-570-server"]
