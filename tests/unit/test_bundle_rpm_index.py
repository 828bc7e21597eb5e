"""The offline bundle reads an RPM repository's metadata (bundle/rpm_index.py) as dnf does.

Version order: the vectors of rpm's own test suite (rpm-software-management/rpm,
tests/rpmvercmp.at), and the caret cases of the commit that added '^' (c7e711b: 1.1^201601
is newer than 1.1, older than 1.1.1). Metadata: repomd.xml, primary.xml and modules.yaml
in the formats createrepo_c and modifyrepo_c write (the ``repo``, ``common`` and ``rpm``
namespaces of http://linux.duke.edu/metadata/; modulemd v2 documents), built here per test
from the packages each test names, so that every value asserted is one the test put in.
"""

import gzip
import itertools

import pytest
from ansible.module_utils.gpunode.bundle import rpm_index
from ansible.module_utils.gpunode.bundle.packages_index import BundleError
from ansible.module_utils.gpunode.host.packages_rpm import compare_evr, vercmp

# rpm's tests/rpmvercmp.at: (a, b, rpm.vercmp(a, b))
RPMVERCMP_AT = [
    ("1.0", "1.0", 0), ("1.0", "2.0", -1), ("2.0.1", "2.0", 1), ("2.0.1a", "2.0.1", 1),
    ("5.5p1", "5.5p2", -1), ("5.5p1", "5.5p10", -1), ("10xyz", "10.1xyz", -1), ("xyz10", "xyz10.1", -1),
    ("xyz.4", "8", -1), ("2", "xyz.4", 1), ("5.5p2", "5.6p1", -1), ("6.0.rc1", "6.0", 1),
    ("10b2", "10a1", 1), ("10a2", "10b2", -1), ("1.0a", "1.0aa", -1), ("10.0001", "10.1", 0),
    ("10.0001", "10.0039", -1), ("4.999.9", "5.0", -1), ("20101121", "20101122", -1), ("2.0", "2_0", 0),
    ("a+", "a_", 0), ("+a", "_a", 0), ("_+", "+_", 0), ("+", "_", 0),
    ("1.0~rc1", "1.0", -1), ("1.0~rc1", "1.0~rc2", -1), ("1.0~rc1~git123", "1.0~rc1", -1),
    # the caret (rpm c7e711b)
    ("1.1^201601", "1.1", 1), ("1.1^201601", "1.1.1", -1), ("1.0^git1", "1.0^git2", -1),
    ("1.0~rc1^git1", "1.0~rc1", 1), ("1.0^git1~pre", "1.0^git1", -1), ("1.0^", "1.0~", 1),
]


@pytest.mark.parametrize("a, b, expected", RPMVERCMP_AT)
def test_versions_order_as_rpm_orders_them_both_ways(a, b, expected):
    assert vercmp(a, b) == expected
    assert vercmp(b, a) == -expected


def test_epoch_then_version_then_release():
    assert compare_evr(("1", "1.0", "1"), ("0", "9.0", "1")) == 1
    assert compare_evr((None, "580.105.08", "1.el9"), ("0", "580.105.08", "2.el9")) == -1
    assert compare_evr(("3", "580.95.05", "1.el9"), ("3", "580.95.05", "1.el9")) == 0


# ---------------------------------------------------------------- metadata, as createrepo_c writes it

def rpm(name, version, *, release="1.el9", arch="x86_64", epoch="0", provides=(), requires=()):
    return {"name": name, "version": version, "release": release, "arch": arch, "epoch": epoch,
            "provides": provides, "requires": requires}


def _entries(tag, entries):
    if not entries:
        return ""
    rows = []
    for entry in entries:
        name, _, evr = entry.partition(" = ")
        if evr:
            epoch, _, rest = evr.rpartition(":")
            version, _, release = rest.partition("-")
            rel = f' rel="{release}"' if release else ""  # createrepo_c writes no rel for none
            rows.append(f'<rpm:entry name="{name}" flags="EQ" epoch="{epoch or 0}" ver="{version}"{rel}/>')
        else:
            rows.append(f'<rpm:entry name="{name}"/>')
    return f"<rpm:{tag}>{''.join(rows)}</rpm:{tag}>"


def primary_xml(packages):
    body = []
    for number, p in enumerate(packages):
        provides = [f"{p['name']} = {p['epoch']}:{p['version']}-{p['release']}", *p["provides"]]
        body.append(f"""<package type="rpm">
  <name>{p['name']}</name><arch>{p['arch']}</arch>
  <version epoch="{p['epoch']}" ver="{p['version']}" rel="{p['release']}"/>
  <checksum type="sha256" pkgid="YES">{number:064x}</checksum>
  <location href="{p['arch']}/{p['name']}-{p['version']}-{p['release']}.{p['arch']}.rpm"/>
  <format>{_entries('provides', provides)}{_entries('requires', p['requires'])}</format>
</package>""")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<metadata xmlns="http://linux.duke.edu/metadata/common" '
            f'xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="{len(packages)}">'
            + "\n".join(body) + "</metadata>\n")


REPOMD = """<?xml version="1.0" encoding="UTF-8"?>
<repomd xmlns="http://linux.duke.edu/metadata/repo" xmlns:rpm="http://linux.duke.edu/metadata/rpm">
  <revision>1764000000</revision>
  <data type="primary">
    <checksum type="sha256">aa11</checksum>
    <location href="repodata/aa11-primary.xml.gz"/>
  </data>
  <data type="modules">
    <checksum type="sha256">bb22</checksum>
    <location href="repodata/bb22-modules.yaml.gz"/>
  </data>
</repomd>
"""

DRIVER = [
    # versioned as NVIDIA's spec requires them (nvidia-kmod-common = %{epoch}:%{version})
    rpm("nvidia-driver", "570.133.20", epoch="3",
        requires=["nvidia-kmod-common = 3:570.133.20", "libc.so.6()(64bit)"]),
    rpm("nvidia-driver", "580.95.05", epoch="3", requires=["nvidia-kmod-common = 3:580.95.05",
                                                           "nvidia-driver-libs = 3:580.95.05-1.el9"]),
    rpm("nvidia-kmod-common", "570.133.20", epoch="3", arch="noarch"),
    rpm("nvidia-kmod-common", "580.95.05", epoch="3", arch="noarch"),
    rpm("nvidia-driver-libs", "580.95.05", epoch="3"),
    rpm("nvidia-driver-libs", "580.95.05", epoch="3", arch="i686"),
    rpm("kmod-nvidia-open-dkms", "580.95.05", epoch="3", provides=["nvidia-kmod = 3:580.95.05-1.el9"],
        requires=["dkms"]),
    rpm("nvidia-fabric-manager", "580.95.05"),
]


def modules_yaml(streams):
    documents = []
    for name, stream, version, artifacts, default in streams:
        rpms = "".join(f"\n      - {a}" for a in artifacts)
        profile = "".join(f"\n        - {p}" for p in default)
        documents.append(f"""---
document: modulemd
version: 2
data:
  name: {name}
  stream: "{stream}"
  version: {version}
  context: 00000000
  arch: x86_64
  summary: stand-in
  description: stand-in
  license:
    module: [MIT]
  profiles:
    default:
      rpms:{profile}
  artifacts:
    rpms:{rpms}
...""")
    documents.append("---\ndocument: modulemd-defaults\nversion: 1\ndata:\n  module: nvidia-driver\n"
                     "  stream: latest-dkms\n...")
    return "\n".join(documents) + "\n"


def test_repomd_names_each_metadata_file_and_its_checksum():
    found = rpm_index.parse_repomd(REPOMD)
    assert found["primary"] == {"href": "repodata/aa11-primary.xml.gz", "checksum_type": "sha256",
                                "checksum": "aa11"}
    assert found["modules"]["href"] == "repodata/bb22-modules.yaml.gz"


@pytest.mark.parametrize("text, problem", [
    ("<repomd", "not XML"),
    ('<repomd xmlns="http://linux.duke.edu/metadata/repo"></repomd>', 'no <data type="primary">'),
    ('<repomd xmlns="http://linux.duke.edu/metadata/repo"><data type="primary"/></repomd>', "no location"),
])
def test_broken_repomd_is_refused_naming_the_file(text, problem):
    with pytest.raises(BundleError, match=f"^mirror/repodata/repomd.xml: .*{problem}"):
        rpm_index.parse_repomd(text, "mirror/repodata/repomd.xml")


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_primary_gives_each_package_as_written(compress):
    data = primary_xml(DRIVER).encode()
    packages = rpm_index.parse_primary(gzip.compress(data) if compress else data)
    assert len(packages) == len(DRIVER)
    first = packages[0]
    assert (first["name"], first["arch"]) == ("nvidia-driver", "x86_64")
    assert first["evr"] == ("3", "570.133.20", "1.el9")
    assert first["href"] == "x86_64/nvidia-driver-570.133.20-1.el9.x86_64.rpm"
    assert [r["name"] for r in first["requires"]] == ["nvidia-kmod-common", "libc.so.6()(64bit)"]
    assert rpm_index.nevra(first) == "nvidia-driver-3:570.133.20-1.el9.x86_64"


def test_a_package_without_a_location_is_refused_naming_the_file():
    location = '<location href="x86_64/nvidia-driver-570.133.20-1.el9.x86_64.rpm"/>'
    text = primary_xml(DRIVER[:1]).replace(location, "")
    problem = r"^cuda-rhel9/primary\.xml: package nvidia-driver has no version, location"
    with pytest.raises(BundleError, match=problem):
        rpm_index.parse_primary(text.encode(), "cuda-rhel9/primary.xml")


def test_a_name_resolves_to_its_newest_version_with_the_repositorys_dependencies():
    packages = rpm_index.parse_primary(primary_xml(DRIVER).encode())
    chosen = rpm_index.resolve(packages, ["nvidia-driver"], "x86_64")
    assert [(p["name"], p["arch"], p["evr"][1]) for p in chosen] == [
        ("nvidia-driver", "x86_64", "580.95.05"),
        ("nvidia-driver-libs", "x86_64", "580.95.05"),  # not the i686 one
        ("nvidia-kmod-common", "noarch", "580.95.05"),
    ]


def test_a_pinned_version_and_a_provided_name_resolve_as_dnf_matches_them():
    # nvidia-driver 570 requires nvidia-kmod-common = 3:570.133.20: not the newest one
    packages = rpm_index.parse_primary(primary_xml(DRIVER).encode())
    chosen = rpm_index.resolve(packages, ["nvidia-driver-570.133.20", "nvidia-kmod"], "x86_64")
    names = {p["name"]: p["evr"][1] for p in chosen}
    assert names == {"nvidia-driver": "570.133.20", "nvidia-kmod-common": "570.133.20",
                     "kmod-nvidia-open-dkms": "580.95.05"}  # dkms is the distribution's (EPEL)


def test_a_module_stream_resolves_to_its_own_artifacts_only():
    packages = rpm_index.parse_primary(primary_xml(DRIVER).encode())
    streams = rpm_index.parse_modules(modules_yaml([
        ("nvidia-driver", "570-open", 1, ["nvidia-driver-3:570.133.20-1.el9.x86_64",
                                          "nvidia-kmod-common-3:570.133.20-1.el9.noarch"], ["nvidia-driver"]),
        ("nvidia-driver", "580-open", 1, ["nvidia-driver-3:580.95.05-1.el9.x86_64"], ["nvidia-driver"]),
    ]))
    assert sorted(streams) == ["nvidia-driver:570-open", "nvidia-driver:580-open"]
    chosen = rpm_index.resolve(packages, ["@nvidia-driver:570-open"], "x86_64", streams=streams)
    assert {p["name"]: p["evr"][1] for p in chosen} == {"nvidia-driver": "570.133.20",
                                                         "nvidia-kmod-common": "570.133.20"}


def test_the_newest_version_of_a_stream_is_the_one_used():
    versions = [(1, "570.124.06"), (3, "570.133.20"), (2, "570.86.10")]
    packages = rpm_index.parse_primary(primary_xml([rpm("nvidia-driver", v) for _, v in versions]).encode())
    for order in itertools.permutations(versions):
        streams = rpm_index.parse_modules(modules_yaml([
            ("nvidia-driver", "570-open", n, [f"nvidia-driver-0:{v}-1.el9.x86_64"], ["nvidia-driver"])
            for n, v in order]))
        chosen = rpm_index.resolve(packages, ["@nvidia-driver:570-open"], "x86_64", streams=streams)
        assert [p["evr"][1] for p in chosen] == ["570.133.20"]


def test_an_enabled_stream_hides_the_other_streams_packages_as_dnf_filters_them():
    # what the role does on EL 9: `dnf module enable nvidia-driver:570-open`, then installs
    # nvidia-open by name; packages of no stream (the fabric manager here) stay visible
    driver = [*DRIVER, rpm("nvidia-open", "570.133.20", epoch="3", requires=["nvidia-driver = 3:570.133.20"]),
              rpm("nvidia-open", "580.95.05", epoch="3", requires=["nvidia-driver = 3:580.95.05"])]
    packages = rpm_index.parse_primary(primary_xml(driver).encode())
    streams = rpm_index.parse_modules(modules_yaml([
        ("nvidia-driver", "570-open", 1, ["nvidia-open-3:570.133.20-1.el9.x86_64",
                                          "nvidia-driver-3:570.133.20-1.el9.x86_64"], ["nvidia-open"]),
        ("nvidia-driver", "580-open", 1, ["nvidia-open-3:580.95.05-1.el9.x86_64",
                                          "nvidia-driver-3:580.95.05-1.el9.x86_64"], ["nvidia-open"]),
    ]))
    chosen = rpm_index.resolve(packages, ["nvidia-open", "nvidia-fabric-manager"], "x86_64", streams=streams,
                               enabled=["nvidia-driver:570-open"])
    assert {p["name"]: p["evr"][1] for p in chosen} == {
        "nvidia-open": "570.133.20", "nvidia-driver": "570.133.20", "nvidia-kmod-common": "570.133.20",
        "nvidia-fabric-manager": "580.95.05"}
    with pytest.raises(BundleError, match=r"no package for x86_64 matches 'nvidia-open'$"):
        rpm_index.resolve(packages, ["nvidia-open"], "x86_64", streams=streams)  # no stream enabled


@pytest.mark.parametrize("wanted, problem", [
    (["nvidia-driver-999.1"],
     r"no package for x86_64 matches 'nvidia-driver-999.1' with nvidia-driver:570-open enabled"),
    (["@nvidia-driver:999-open"], r"no module stream nvidia-driver:999-open for x86_64 \(streams there: "
                                  r"nvidia-driver:570-open\)"),
    (["@nvidia-driver:570-open/fm"], r"module stream nvidia-driver:570-open has no profile fm"),
])
def test_what_the_repository_lacks_is_refused_naming_it(wanted, problem):
    packages = rpm_index.parse_primary(primary_xml(DRIVER).encode())
    streams = rpm_index.parse_modules(modules_yaml([
        ("nvidia-driver", "570-open", 1, ["nvidia-driver-3:570.133.20-1.el9.x86_64"], ["nvidia-driver"])]))
    with pytest.raises(BundleError, match="^cuda-rhel9: " + problem):
        rpm_index.resolve(packages, wanted, "x86_64", streams=streams, enabled=["nvidia-driver:570-open"],
                          source="cuda-rhel9")


def test_downloads_carry_the_metadatas_checksum():
    packages = rpm_index.parse_primary(primary_xml(DRIVER).encode())
    chosen = rpm_index.resolve(packages, ["nvidia-fabric-manager"], "x86_64")
    assert rpm_index.downloads("https://mirror.example/cuda/rhel9/x86_64/", chosen, "/b/rpms/cuda") == [{
        "url": "https://mirror.example/cuda/rhel9/x86_64/x86_64/nvidia-fabric-manager-580.95.05-1.el9.x86_64.rpm",
        "dest": "/b/rpms/cuda/nvidia-fabric-manager-580.95.05-1.el9.x86_64.rpm",
        "checksum": "sha256:" + f"{7:064x}", "package": "nvidia-fabric-manager", "version": "580.95.05-1.el9",
    }]


# ---------------------------------------------------------------- dnf's versionlock (EL 10) and providers

EL10 = [
    rpm("nvidia-open", "570.133.20", release="1.el10", requires=["kmod-nvidia-open-dkms"]),
    rpm("nvidia-open", "580.95.05", release="1.el10", requires=["kmod-nvidia-open-dkms"]),
    rpm("kmod-nvidia-open-dkms", "570.133.20", release="1.el10", epoch="3",
        provides=["nvidia-kmod = 3:570.133.20-1.el10"], requires=["nvidia-kmod-common"]),
    rpm("kmod-nvidia-open-dkms", "580.95.05", release="1.el10", epoch="3",
        provides=["nvidia-kmod = 3:580.95.05-1.el10"], requires=["nvidia-kmod-common"]),
    rpm("kmod-nvidia-latest-dkms", "580.95.05", release="1.el10", epoch="3",
        provides=["nvidia-kmod = 3:580.95.05-1.el10"], requires=["nvidia-kmod-common"]),
    rpm("nvidia-kmod-common", "580.95.05", release="1.el10", epoch="3", arch="noarch",
        requires=["nvidia-kmod = 3:580.95.05"]),
    rpm("nvidia-kmod-common", "570.133.20", release="1.el10", epoch="3", arch="noarch",
        requires=["nvidia-kmod = 3:570.133.20"]),
    rpm("nvidia-container-toolkit", "1.17.8", release="1"),  # no lock names it
]


def test_a_version_lock_keeps_the_versions_it_names_of_the_names_it_names():
    # EL 10: the role runs `dnf versionlock add '*nvidia*570*'`, then installs nvidia-open
    packages = rpm_index.parse_primary(primary_xml(EL10).encode())
    chosen = rpm_index.resolve(packages, ["nvidia-open", "nvidia-container-toolkit"], "x86_64",
                               locks=["*nvidia*570*"])
    assert {p["name"]: p["evr"][1] for p in chosen} == {
        "nvidia-open": "570.133.20", "kmod-nvidia-open-dkms": "570.133.20",
        "nvidia-kmod-common": "570.133.20", "nvidia-container-toolkit": "1.17.8"}
    with pytest.raises(BundleError, match=r"^cuda-rhel10: no package for x86_64 matches the version lock "
                                          r"'\*nvidia\*999\*'"):
        rpm_index.resolve(packages, ["nvidia-open"], "x86_64", locks=["*nvidia*999*"], source="cuda-rhel10")
    # a lock written as versionlock.list writes it (name-epoch:version-release.arch)
    lock = "nvidia-open-0:580.95.05-1.el10.*"
    listed = rpm_index.resolve(packages, ["nvidia-open"], "x86_64", locks=[lock])
    assert [(p["name"], p["evr"][1]) for p in listed][-1] == ("nvidia-open", "580.95.05")


def test_a_requirement_met_by_a_package_already_chosen_takes_no_other_provider():
    # nvidia-kmod-common requires nvidia-kmod, which both kmods provide: dnf keeps the one the
    # meta package asked for, and never adds the proprietary kmod beside the open one
    packages = rpm_index.parse_primary(primary_xml(EL10).encode())
    chosen = rpm_index.resolve(packages, ["nvidia-open"], "x86_64")
    assert [p["name"] for p in chosen] == ["kmod-nvidia-open-dkms", "nvidia-kmod-common", "nvidia-open"]
