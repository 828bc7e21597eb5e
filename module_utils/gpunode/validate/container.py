# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The container check: a container started through each engine the node runs sees every GPU.

The check NVIDIA's container toolkit install guide ends with
(https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/sample-workload.html:
``docker run --rm --runtime=nvidia --gpus all ubuntu nvidia-smi``), here with
``nvidia-smi -L`` inside, whose UUIDs must be the host's:

- Docker: its default runtime (no ``--runtime``, no ``--gpus``: the runtime
  role makes ``nvidia`` the default, and ``NVIDIA_VISIBLE_DEVICES=all`` asks it
  for every GPU), and CDI (``--device nvidia.com/gpu=all``) where a CDI spec
  for nvidia.com/gpu exists;
- containerd: ``ctr run`` with the runc shim running the nvidia runtime
  (``--runc-binary nvidia-container-runtime``), the handler Kubernetes pods use.

Check mode pulls nothing: an image that is not there yet skips that engine.
Standard library only; Python 3.8+ (runs on managed nodes).
"""

import os

from ansible.module_utils.gpunode.host.files import exists
from ansible.module_utils.gpunode.validate.checks import result, skipped
from ansible.module_utils.gpunode.validate.smi import parse_list

CDI_SPECS = ("/etc/cdi/nvidia.yaml", "/etc/cdi/nvidia.json",
             "/var/run/cdi/nvidia.yaml", "/var/run/cdi/nvidia.json")
CTR_NAMESPACE = "gpunode"
LIST = ["nvidia-smi", "-L"]
NO_PULL = "check mode pulls nothing"


def _said(text):
    return " ".join(text.split())[:300]


def _judge(how, answer, uuids):
    rc, out, err = answer
    if rc != 0:
        shown = " ".join((err or out).split())[:300]
        return result("container", "all", False, f"{how}: exit {rc}: {shown}")
    seen = parse_list(out)
    missing = [uuid for uuid in uuids if uuid not in seen]
    if missing:
        return result("container", "all", False, f"{how}: sees {len(seen)} of {len(uuids)} GPUs; "
                                                 f"missing {', '.join(missing)}")
    return result("container", "all", True, f"{how}: sees all {len(uuids)} GPUs")


def docker_runs(host, docker, image, uuids):
    """Docker's default runtime, and CDI where a spec exists."""
    rc, _out, err = host.run([docker, "image", "inspect", "--format", "{{.Id}}", image])
    if rc != 0:
        if host.check_mode:
            return [skipped("container", "all", f"docker: image {image} not present; {NO_PULL}")]
        rc, _out, err = host.run([docker, "pull", image])
        if rc != 0:
            return [result("container", "all", False, f"docker pull {image}: {_said(err)}")]
    found = []
    argv = [docker, "run", "--rm", "-e", "NVIDIA_VISIBLE_DEVICES=all", image, *LIST]
    found.append(_judge("docker (default runtime)", host.run(argv), uuids))
    if any(exists(path) for path in CDI_SPECS):
        argv = [docker, "run", "--rm", "--device", "nvidia.com/gpu=all", image, *LIST]
        found.append(_judge("docker (CDI nvidia.com/gpu=all)", host.run(argv), uuids))
    return found


def containerd_run(host, ctr, runtime_binary, image, uuids):
    """containerd through the nvidia runtime (the handler the kubelet's pods use)."""
    base = [ctr, "--namespace", CTR_NAMESPACE]
    rc, out, _err = host.run([*base, "images", "ls", "-q", f"name=={image}"])
    listed = rc == 0 and image in out.split()
    if not listed:
        if host.check_mode:
            return [skipped("container", "all", f"containerd: image {image} not present; {NO_PULL}")]
        rc, _out, err = host.run([*base, "images", "pull", image])
        if rc != 0:
            return [result("container", "all", False, f"ctr images pull {image}: {_said(err)}")]
    argv = [*base, "run", "--rm", "--runc-binary", runtime_binary, "--env", "NVIDIA_VISIBLE_DEVICES=all",
            image, f"gpunode-validate-{os.getpid()}", *LIST]
    return [_judge("containerd (nvidia runtime)", host.run(argv), uuids)]


def container(host, image, uuids):
    """Results of the container check on every engine found; skipped, saying why, without one."""
    if not image:
        return [skipped("container", "all", "no container image set (container_image)")]
    found = []
    docker = host.which("docker")
    if docker and host.run([docker, "info", "--format", "{{.ServerVersion}}"])[0] == 0:
        found.extend(docker_runs(host, docker, image, uuids))
    ctr, runtime = host.which("ctr"), host.which("nvidia-container-runtime")
    if ctr and runtime and host.run([ctr, "version"])[0] == 0:
        found.extend(containerd_run(host, ctr, runtime, image, uuids))
    if not found:
        return [skipped("container", "all", "no running container engine (docker, or ctr with "
                                            "nvidia-container-runtime)")]
    return found
