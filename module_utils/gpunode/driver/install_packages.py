# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the nvidia_driver role installs on a node that has no NVIDIA driver yet.

Asked by the offline bundle (``gpunode.bundle``), which lists the answer and decides
nothing. :func:`role_install` answers with the role's own decisions, in the order
``nvidia_driver_state`` takes them (``stages.read_request`` and ``planned``): the request
from the role's values (:func:`~ansible.module_utils.gpunode.driver.driver.build_request`,
the module's defaults for what is not given), Ubuntu's signed modules where the role
switches to them (``signed_fallback``: Secure Boot without a signing key), their packages
as the role names them before it has read the archive (``signed_request``), then the
plan (``plan``) over :func:`bare_state`, a node where nothing of the driver is installed,
built or loaded. What that plan installs is what the role installs. Refusals are the
role's :class:`~ansible.module_utils.gpunode.driver.driver.DriverError`.

``preinstalled`` adopts the driver the image brings: its plan
(``plan.PREINSTALLED_STEPS``) installs nothing, so such a node carries no driver package
and no installer, and :func:`role_install` says so in its warnings.
"""

from ansible.module_utils.gpunode.driver import packages as nvidia_packages
from ansible.module_utils.gpunode.driver.driver import DriverError, build_request
from ansible.module_utils.gpunode.driver.fabric_plan import from_distribution, with_fabric
from ansible.module_utils.gpunode.driver.plan import plan, signed_fallback, signed_request
from ansible.module_utils.gpunode.driver.preinstalled import PREINSTALLED
from ansible.module_utils.gpunode.driver.state_call import ARGUMENT_SPEC
from ansible.module_utils.parsing.convert_bool import boolean

#: An installer may be gathered before the inventory gives its checksum (the bundle's
#: SHA256SUMS then tells it): the request is built with this stand-in, never returned.
UNKNOWN_CHECKSUM = "0" * 64
#: The package archive as the role sees it before its index refresh: nothing read yet.
UNREAD_ARCHIVE = {"names": [], "drivers": {}, "depends": {}}


def role_params(values):
    """The arguments of ``nvidia_driver_state`` for the role's values (``method``, ``branch``, ...:
    the ``nvidia_driver_*`` names without the prefix); a value not given (None or "") is the
    module's default; booleans converted and choices checked as the module does."""
    params = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    for name, value in values.items():
        if value is None or value == "":
            continue
        spec = ARGUMENT_SPEC[name]
        if spec.get("choices") and value not in spec["choices"]:
            raise DriverError(f"nvidia_driver_{name}: {value!r} is not one of {', '.join(spec['choices'])}")
        params[name] = boolean(value) if spec["type"] == "bool" else value
    return params


def bare_state(os_info, secure_boot=False):
    """A node without the driver, as ``driver.host.read_state`` would read it: dpkg's database
    empty where apt serves the distribution (None elsewhere), nothing loaded, built, held or
    running, the apt index not read."""
    try:
        nvidia_packages.release_of(os_info["distribution"], os_info["distribution_version"])
        packages = {}
    except nvidia_packages.PackageError:
        packages = None
    state = {"kernel": os_info["kernel"], "headers_present": False, "module_on_disk": None, "dkms": None,
             "loaded": {"modules": [], "version": None, "module_type": None}, "userspace_version": None,
             "packages": packages, "dpkg_interrupted": [], "services": {}, "persistenced_unit": False,
             "blacklist_complete": False, "secure_boot": bool(secure_boot), "signing_files_missing": [],
             "index": None, "smi": None, "initramfs_command": None,
             # nothing of a fabric read: no IB module loaded, no file, the kernel without mlx5_ib
             "fabric": {"loaded": [], "files": {}, "nvidia_params": None,
                        "kernels_without_ib": [os_info["kernel"]] if os_info["kernel"] else []}}
    state.update((key, os_info[key]) for key in ("distribution", "distribution_version", "architecture"))
    return state


def role_install(values, gpu, os_info, secure_boot=False):
    """What the role installs on a node without the driver, whose GPUs are ``gpu`` (the
    ``nvidia_gpu`` facts) and whose ``os_info`` is ``distribution``, ``distribution_version``,
    ``architecture``, ``kernel`` ("" when unknown: the kernel headers are then left out).

    Returns ``method`` (the role's, after its Secure Boot switch), ``branch``, ``version``,
    ``module_type``, ``release`` (``ubuntu-24.04``; None where apt does not serve the node),
    ``repository`` (NVIDIA's CUDA repository when the driver's packages come from it, else
    None), ``repository_packages`` (the apt or dnf requests it serves), ``distribution_packages``
    (those the distribution's archive serves), ``runfile`` (``name``, ``url``, ``checksum``
    as given, or None), ``package_manager`` (``apt``, ``dnf``), ``module_streams`` (the dnf
    module streams the role enables first: EL 9), ``version_locks`` (the ``dnf versionlock add``
    specs it adds first: EL 10) and ``warnings``.
    """
    result = {"method": None, "branch": None, "version": None, "module_type": None, "release": None,
              "repository": None, "repository_packages": [], "distribution_packages": [], "runfile": None,
              "package_manager": None, "module_streams": [], "version_locks": [],
              "warnings": []}
    if not gpu.get("present"):
        return result  # nvidia_driver_state: "no NVIDIA GPU: nothing to do"
    params = role_params(values)
    if params["method"] == "runfile" and not params["runfile_checksum"]:
        params["runfile_checksum"] = UNKNOWN_CHECKSUM
    request = with_fabric(build_request(params, gpu, os_info), params, gpu, os_info)
    state = bare_state(os_info, secure_boot)
    request = signed_fallback(state, request)
    if request["method"] == "ubuntu-signed":
        request = signed_request(request, state, UNREAD_ARCHIVE)
    elif request["method"] == "el-signed":  # its kmod is the repository's for the node's kernel
        raise DriverError("nvidia_driver_method el-signed (Secure Boot, no signing key, on the RHEL family): "
                          "the signed module is chosen on the node from its repository; the offline bundle "
                          "does not carry it")
    steps = plan(state, request)
    result.update((key, request[key]) for key in ("method", "branch", "version", "module_type"))
    result["warnings"] = list(request["warnings"])
    _packages(result, params, request, steps, os_info)
    if request["runfile"] and steps["install"]:
        result["runfile"] = {"name": request["runfile"]["name"], "url": request["runfile"]["url"],
                             "checksum": values.get("runfile_checksum") or ""}
    if request["method"] == PREINSTALLED and not steps["install"]:
        result["warnings"].append("nvidia_driver_method: preinstalled adopts the driver the image brings: "
                                  "no driver package and no installer to carry")
    return result


def _packages(result, params, request, steps, os_info):
    """Split what the plan installs by the archive that serves it."""
    driver = list(steps["install_packages"])
    fabric = steps["fabric"] or {"install": [], "packages": []}
    driver += [nvidia_packages.version_spec(name, fabric["version"], request.get("package_manager") or "apt")
               for name in fabric["install"]] + [n for n in fabric["packages"] if not from_distribution(n)]
    distribution = [name for name in steps["prerequisites"] if os_info["kernel"]
                    or name != request["headers_package"]]
    if len(distribution) < len(steps["prerequisites"]):
        headers = request["headers_package"] + "<kernel>"
        result["warnings"].append(f"the kernel is not known: its headers ({headers}) are left out")
    distribution += steps["kernel_modules"] + [n for n in fabric["packages"] if from_distribution(n)]
    # where the request's packages come from (driver._package_request: ubuntu-signed's, the distribution)
    source = "distro" if request["method"] == "ubuntu-signed" else params["package_source"]
    if driver or distribution:
        family, key, _warning = nvidia_packages.release_of(os_info["distribution"],
                                                           os_info["distribution_version"])
        result["release"] = f"{family}-{key}"
        if driver and source == "cuda":
            result["repository"] = nvidia_packages.cuda_repository(family, key, os_info["architecture"])[0]
            result["repository_packages"], driver = driver, []
    result["distribution_packages"] = distribution + driver
    result["package_manager"] = request.get("package_manager") or "apt"
    # EL 9: the dnf module stream the role enables before it installs (plan.module_stream)
    result["module_streams"] = [steps["module_stream"]["stream"]] if steps.get("module_stream") else []
    # EL 10: the dnf versionlock spec that pins the branch before the install (plan.version_lock)
    result["version_locks"] = [steps["version_lock"]] if steps.get("version_lock") else []
