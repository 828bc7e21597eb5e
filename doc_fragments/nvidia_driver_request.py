# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The driver request: the options of nvidia_driver_state and nvidia_driver_verify (module_utils
gpunode/driver/state_call.py, REQUEST_SPEC).

A module names it in ``extends_documentation_fragment`` as ``nvidia_driver_request``; the
collection build writes the collection's name in front, as for ``node_lock``. The driver role
gives both modules the same values (``module_defaults``: what is asked for, and where the
node's trees are), so the check after the change reads the node as the plan did.
"""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  gpu:
    description: The C(nvidia_gpu) facts; detected here when omitted.
    type: dict
  pci_ids_path:
    description: Without O(gpu) - the C(pci.ids) file to name devices from (as C(nvidia_gpu_facts));
      default the system's, if any.
    type: path
  require_gpu:
    description: Without O(gpu) - fail on a host where no NVIDIA GPU is found (as C(nvidia_gpu_facts)).
    type: bool
    default: false
  require_branch:
    description: Without O(gpu) - fail on a host with GPUs that no single driver branch drives (as
      C(nvidia_gpu_facts)).
    type: bool
    default: false
  fabric:
    description: Without O(gpu) - the NVLink fabric as the inventory says it, over what PCI tells (as
      C(nvidia_gpu_facts)' O(fabric)); V(auto) detects.
    type: str
    choices: [auto, none, nvswitch, nvlink5, mnnvl]
    default: auto
  method:
    description:
      - V(packages), V(runfile) or V(ubuntu-signed) (Canonical's prebuilt modules signed with its key,
        C(linux-modules-nvidia-<branch>[-server][-open]-<kernel>), with the userspace without DKMS; Ubuntu
        only). V(packages) on Ubuntu from the distribution under Secure Boot without O(signing_key), where it
        would build an unsigned module, becomes V(ubuntu-signed) (with a warning).
      - V(el-signed) (the RHEL family - RHEL 10.1 and later, AlmaLinux 9 and 10) installs the
        distribution's prebuilt open modules signed with its key, for the running kernel and each kernel
        installed after it (the kmod its repository C(rhel-<major>-for-<arch>-extensions-rpms) or
        C(almalinux-nvidia) builds for that kernel, from the repository's metadata), with NVIDIA's
        C(nvidia-driver-cuda) at its version and no DKMS. V(packages) on the RHEL family under Secure Boot
        without O(signing_key) becomes V(el-signed); it is refused before any change where the distribution
        signs no NVIDIA module (Rocky, RHEL before 10.1).
      - V(preinstalled) adopts the driver the host runs (an image's, a vendor's) and never installs, removes,
        replaces or reloads it; it verifies that its branch drives every GPU, that it is O(version) and on
        O(branch) exactly when they are set, and O(module_type); it holds the packages that own it, if any.
      - V(packages), V(runfile) and V(ubuntu-signed) refuse, before any change, a loaded driver that no
        package and no C(.run) install owns (an image's); every method refuses one the GPU Operator manages
        (C(/run/nvidia/driver)).
    type: str
    choices: [packages, runfile, ubuntu-signed, el-signed, preinstalled]
    default: packages
  version:
    description: A full driver version the user asked for.
    type: str
  branch:
    description: A driver branch the user asked for.
    type: str
  check_branch:
    description: Refuse a O(branch) or O(version) that cannot drive every GPU.
    type: bool
    default: true
  module_type:
    description: Kernel module type wanted.
    type: str
    choices: [auto, open, proprietary]
    default: auto
  package_source:
    description: V(distro) (the distribution's archive) or V(cuda) (NVIDIA's CUDA repository).
    type: str
    choices: [distro, cuda]
    default: distro
  apt_repository:
    description: An apt source line to use instead of the default for the source.
    type: str
  apt_key_url:
    description: The repository's signing key URL.
    type: str
  keyring:
    description: Where the role stores the repository's key (the source line's C(signed-by)).
    type: path
    default: /etc/apt/keyrings/gpunode-nvidia-driver.asc
  rpm_repository:
    description: On RHEL, Rocky and AlmaLinux, the C(baseurl) of a mirror of NVIDIA's CUDA repository
      to use instead of U(https://developer.download.nvidia.com/compute/cuda/repos/rhel<N>/<arch>/).
    type: str
  rpm_key_url:
    description: The mirror's signing key URL (default the C(D42D0685.pub) under O(rpm_repository));
      the repository is always added with C(gpgcheck).
    type: str
  hold:
    description: Hold the driver packages (converged on every run - a false value releases them).
    type: bool
    default: true
  kernel_hold:
    description: Hold the running kernel's flavour metapackages (apt - C(linux-image-<flavour>),
      C(linux-headers-<flavour>), C(linux-<flavour>)) or version-lock C(kernel*) (dnf), so that no new kernel
      is installed; a false value releases only the holds gpunode made (listed in
      C(/var/lib/gpunode/kernel-holds)), never the operator's own.
    type: bool
    default: false
  install_prerequisites:
    description: Plan kernel headers, DKMS and a compiler when a build needs them.
    type: bool
    default: true
  blacklist_nouveau:
    description: Want nouveau blacklisted in O(blacklist_path).
    type: bool
    default: true
  blacklist_path:
    description: The modprobe.d file of the nouveau blacklist.
    type: path
    default: /etc/modprobe.d/blacklist-nouveau.conf
  persistence:
    description: Want C(nvidia-persistenced) enabled and running.
    type: bool
    default: true
  fabricmanager:
    description:
      - The fabric manager at the driver's version - V(auto) (NVSwitch and NVLink5 systems), V(always) or
        V(never).
      - On NVLink5 (HGX B200/B300) it comes with NSCQ, NVSDM (amd64) at the driver's version, C(nvlsm),
        C(infiniband-diags) and the IB modules C(mlx5_core), C(mlx5_ib), C(ib_umad) (also at boot,
        C(/etc/modules-load.d/gpunode-nvidia-fabric.conf)); V(never) leaves all of that out.
      - On GB200/GB300 trays (fabric C(mnnvl)) V(auto) masks the fabric manager's and NVLSM's units where
        they exist.
    type: str
    choices: [auto, always, never]
    default: auto
  imex_mode:
    description:
      - On GB200/GB300 trays (fabric C(mnnvl)), who runs IMEX. Both install C(nvidia-imex) at the driver's
        version, held, and set C(NVreg_CreateImexChannel0=1) (and from 580
        C(NVreg_CoherentGPUMemoryMode=driver)) in C(/etc/modprobe.d/gpunode-nvidia-fabric.conf).
      - V(host) sets O(imex_config) in C(/etc/nvidia-imex/config.cfg), writes O(imex_nodes) to
        C(/etc/nvidia-imex/nodes_config.cfg) and enables and starts C(nvidia-imex) (restarted when either
        file changes).
      - V(dra) stops, disables and masks C(nvidia-imex) (the DRA driver's ComputeDomain daemons run IMEX).
    type: str
    choices: [host, dra]
    default: dra
  imex_nodes:
    description: With O(imex_mode=host), the IP addresses of every node of the tray's NVLink domain, in the
      order of the nodes file (the same list on every node).
    type: list
    elements: str
    default: []
  imex_config:
    description: With O(imex_mode=host), settings of C(/etc/nvidia-imex/config.cfg) (C(KEY) to value) over
      C(IMEX_CMD_ENABLED=1); C(IMEX_NODE_CONFIG_FILE) is always the nodes file above.
    type: dict
    default: {}
  peermem:
    description:
      - The node uses C(nvidia_peermem) (GPUDirect RDMA) - loaded after the IB modules and the driver (not
        while a reboot is pending) and at every boot by the unit C(gpunode-nvidia-peermem.service), ordered
        after C(systemd-modules-load) and DOCA-OFED's C(openibd) (which cannot replace IB modules it holds).
      - Turned off, the unit is disabled and removed (what is loaded stays until the next boot).
      - Whatever this says, a driver reload puts back the C(nvidia_peermem) it unloaded.
    type: bool
    default: false
  signing_key:
    description: Module signing secret key on the host.
    type: path
  signing_cert:
    description: Module signing public key (DER certificate) on the host.
    type: path
  runfile_url:
    description: Where the installer comes from (default NVIDIA's server for the version).
    type: str
  runfile_checksum:
    description: The installer's sha256 (V(sha256:<hex>) or V(<hex>)); required by the runfile method.
    type: str
  runfile_extra_flags:
    description: Further installer options.
    type: list
    elements: str
    default: []
  sysfs_root:
    description: Where sysfs is mounted (a fake tree in tests).
    type: path
    default: /sys
  proc_root:
    description: Where procfs is mounted (a fake tree in tests).
    type: path
    default: /proc
  image_build:
    description:
      - Image bake mode - plan the driver for the image's kernel (O(image_kernel)) without a GPU, loading,
        unloading, starting and rebooting nothing (left for the boot). Needs O(branch) or O(version);
        refuses O(signing_key).
    type: bool
    default: false
  image_kernel:
    description:
      - The kernel release an image build plans for; it must be under C(/lib/modules). Default the newest
        there with headers (a C(build) link). The running kernel is read from
        C(<proc_root>/sys/kernel/osrelease).
    type: str
"""
