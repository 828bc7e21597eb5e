"""nvidia_gpu_validate's cdi check: real spec files, as nvidia-ctk cdi generate writes them, in a temp
root, judged against the real nvidia-smi readings of ../shared (one H100, 8x B200; an H100 in MIG
mode with its real nvidia-smi -L); the simulated node's nvidia-ctk writes a spec the check passes."""

import json
import os
import subprocess

import pytest
from ansible.module_utils.gpunode.validate import cdi, run
from conftest import ROOT, shared_path

H100_XML = shared_path("fixtures", "real-hosts", "h100-sxm5-80gb-vm", "smi-q.xml").read_text()
B200_XML = shared_path("fixtures", "fabric", "smi-qx-k8s-test-infra", "qx-b200.xml").read_text()
MIG_LIST = shared_path("fixtures", "nvidia", "nvidia-smi-L-590.48.01-H100-MIG.txt").read_text()
H100_UUID = "GPU-00000000-1111-2222-3333-444444444444"
STUB_CTK = ROOT / "tests/simnode/fakes/container-toolkit/nvidia-container-toolkit-base/usr/bin/nvidia-ctk"
STUB_SMI = ROOT / "tests/simnode/fakes/driver/bin/nvidia-smi"


def device(name, nodes):
    """One device as nvidia-ctk writes it (cmd/nvidia-ctk/cdi/generate/generate_test.go's layout)."""
    lines = [f'    - name: "{name}"' if name != "all" else "    - name: all", "      containerEdits:",
             "        deviceNodes:"]
    for node in nodes:
        lines += [f"            - path: /dev/nvidia{node}", f"              hostPath: /dev/nvidia{node}"]
    return lines


def spec_text(names):
    """A spec of kind nvidia.com/gpu with ``names`` (index names map to /dev/nvidiaN) and ``all``."""
    lines = ["---", "cdiVersion: 0.5.0", "kind: nvidia.com/gpu", "devices:"]
    for name in names:
        lines += device(name, [name.split(":")[0] if name[0].isdigit() else "0"])
    lines += ["containerEdits:", "    env:", "        - NVIDIA_VISIBLE_DEVICES=void",
              "    hooks:", "        - hookName: createContainer", "          path: /usr/bin/nvidia-cdi-hook",
              "          args:", "            - nvidia-cdi-hook", "            - update-ldcache",
              "    mounts:", "        - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
              "          containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
              "          options: [ro, nosuid, nodev, rbind, rprivate]"]
    return "\n".join(lines) + "\n"


class Host:
    """nvidia-smi's real answers; systemctl show of nvidia-cdi-refresh.path as ``unit`` says."""

    def __init__(self, xml, listing="", unit=None):
        self.xml, self.listing, self.unit = xml, listing, unit

    def which(self, name):
        return "/usr/bin/systemctl" if name == "systemctl" and self.unit else None

    def run(self, argv):
        answers = {"-q -x": self.xml, "-L": self.listing}
        if argv[0].endswith("systemctl"):
            return 0, "Id=nvidia-cdi-refresh.path\nLoadState=loaded\n" + self.unit, ""
        return 0, answers[" ".join(argv[1:])], ""


@pytest.fixture
def root(tmp_path, monkeypatch):
    dirs = (tmp_path / "etc/cdi", tmp_path / "var/run/cdi")
    for folder in dirs:
        folder.mkdir(parents=True)
    monkeypatch.setattr(cdi, "SPEC_DIRS", tuple(map(str, dirs)))
    return dirs[1]


def check(host):
    results = run.validate(host, {"nvidia_smi": "/usr/bin/nvidia-smi", "checks": ["cdi"]})["results"]
    assert {r["check"] for r in results} == {"cdi"}
    return results


def b200_names(skip=()):
    return [name for i in range(8) if i not in skip
            for name in (str(i), f"GPU-0000000{i}-0000-0000-0000-00000000000{i}")] + ["all"]


def test_the_spec_nvidia_ctk_writes_passes(root):
    (root / "nvidia.yaml").write_text(spec_text(b200_names()))
    [found] = check(Host(B200_XML))
    assert found["passed"] is True, found
    assert found["message"] == f"{root}/nvidia.yaml: lists all and every GPU of the node (17 devices)"


def test_a_gpu_missing_fails_naming_the_file_and_its_names(root):
    (root / "nvidia.yaml").write_text(spec_text(b200_names(skip=(7,))))
    [found] = check(Host(B200_XML))
    assert found["passed"] is False
    assert found["message"].startswith(f"{root}/nvidia.yaml: no device 7, "
                                       "GPU-00000007-0000-0000-0000-000000000007 of kind nvidia.com/gpu")


def test_all_missing_fails(root):
    (root / "nvidia.yaml").write_text(spec_text(["0", H100_UUID]))
    [found] = check(Host(H100_XML))
    assert found["passed"] is False
    assert found["message"] == (f"{root}/nvidia.yaml: no device all of kind nvidia.com/gpu "
                                "(pods asking for them fail; it lists 2 devices)")


def mig_xml():
    assert "<current_mig>Disabled</current_mig>" in H100_XML
    return H100_XML.replace("<current_mig>Disabled</current_mig>", "<current_mig>Enabled</current_mig>")


@pytest.mark.parametrize("full_gpu", [True, False])  # 1.17 also lists the GPU, 1.18 its MIG devices only
def test_mig_devices_are_named_by_gpu_and_mig_index_and_by_uuid(root, full_gpu):
    migs = [name for j in range(4) for name in (f"0:{j}", f"MIG-0000000{j}-0000-0000-0000-00000000000{j}")]
    (root / "nvidia.yaml").write_text(spec_text((["0", H100_UUID] if full_gpu else []) + migs + ["all"]))
    [found] = check(Host(mig_xml(), MIG_LIST))
    assert found["passed"] is True, found
    (root / "nvidia.yaml").write_text(spec_text([*migs[:-2], "all"]))
    [found] = check(Host(mig_xml(), MIG_LIST))
    assert "no device 0:3, MIG-00000003-0000-0000-0000-000000000003 of kind" in found["message"]


def test_a_json_spec_and_one_named_by_index_only(root):
    spec = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "containerEdits": {},
            "devices": [{"name": name, "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}
                        for name in ("0", H100_UUID, "all")]}
    (root / "nvidia.json").write_text(json.dumps(spec))
    index_only = spec_text(["0", "all"])  # nvidia-ctk cdi generate --device-name-strategy=index
    (root.parents[2] / "etc/cdi/nvidia.yaml").write_text(index_only)
    assert [r["passed"] for r in check(Host(H100_XML))] == [True, True]


def test_another_kind_is_not_judged_and_no_spec_does_not_apply(root):
    (root / "nvswitch.yaml").write_text(spec_text(["all"]).replace("nvidia.com/gpu", "nvidia.com/nvswitch"))
    [found] = check(Host(H100_XML))
    assert found["passed"] is None
    assert found["message"].endswith("and no enabled nvidia-cdi-refresh.path: CDI is not in use")


def test_no_spec_while_nvidia_cdi_refresh_keeps_one_fails(root):
    [found] = check(Host(H100_XML, unit="ActiveState=failed\nUnitFileState=enabled\n"))
    assert found["passed"] is False
    assert found["message"] == (f"no CDI spec of kind nvidia.com/gpu in {root.parents[2]}/etc/cdi, {root}, "
                                "while nvidia-cdi-refresh.path is enabled to keep one (it is failed)")


@pytest.mark.parametrize(("content", "said"), [
    ("kind: nvidia.com/gpu\ndevices: [\n", "not a CDI spec: while parsing"),
    (b"kind: nvidia.com/gpu\n\xff\n", "byte 21: not UTF-8 text"),
    ("- just\n- a list\n", "not a CDI spec (a mapping with a devices list)"),
    (None, "is a FIFO"),
])
def test_an_unreadable_spec_fails_naming_it(root, content, said):
    path = root / "nvidia.yaml"
    if content is None:
        os.mkfifo(path)
    else:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    [found] = check(Host(H100_XML))
    assert found["passed"] is False
    assert found["message"].startswith(f"{path}") and said in found["message"], found["message"]


def test_the_simulated_nodes_nvidia_ctk_writes_a_spec_that_passes(tmp_path, root):
    sim, bin_dir = tmp_path / "sim", tmp_path / "bin"
    for address in ("0000:00:1e.0", "0000:00:1f.0"):
        gpu = sim / "sys/bus/pci/devices" / address
        gpu.mkdir(parents=True)
        for name, value in {"vendor": "0x10de", "device": "0x1eb8", "class": "0x030200"}.items():
            (gpu / name).write_text(value + "\n")
    (sim / "sys/module/nvidia").mkdir(parents=True)
    (sim / "sys/module/nvidia/version").write_text("580.95.05\n")
    (sim / "proc/driver/nvidia").mkdir(parents=True)
    (sim / "proc/driver/nvidia/version").write_text("NVRM version: 580.95.05\n")
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(STUB_SMI.read_text().replace("@VERSION@", "580.95.05").replace(
        ". /etc/gpunode-sim/driver-fakes.conf", f"SIM_ROOT={sim}"))
    smi.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GPUNODE_SIM_ROOT": str(sim)}
    for listed in (True, False):  # the node's nvidia-smi -L, else its PCI bus
        if not listed:
            smi.rename(tmp_path / "hidden-nvidia-smi")
        subprocess.run(["sh", str(STUB_CTK), "cdi", "generate", f"--output={root}/nvidia.yaml"], env=env,
                       check=True, capture_output=True)
        xml = subprocess.run([str(tmp_path / "hidden-nvidia-smi" if not listed else smi), "-q", "-x"],
                             check=True, capture_output=True, text=True).stdout
        [found] = check(Host(xml))
        assert found["passed"] is True, found
        assert "(5 devices)" in found["message"]
