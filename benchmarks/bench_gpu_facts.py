#!/usr/bin/env python3
"""How long nvidia_gpu_facts' work takes on the simulated HGX H100 tree.

Builds the tree from tests/simnode/specs/hgx-h100.yml in a temporary directory,
then times module_utils/gpunode/driver/gpu.py gather() (sysfs walk, pci.ids names, driver
version, branch choice): the median of N runs, once with the project's small
test pci.ids and, where the system has one, with the system's full pci.ids.
Target: under 50 ms. A benchmark, not a test: it prints, it does not assert.

Usage: python benchmarks/bench_gpu_facts.py [-n RUNS]
"""

import argparse
import importlib.util
import pathlib
import statistics
import sys
import tempfile
import time
import types

ROOT = pathlib.Path(__file__).resolve().parents[1]
TARGET_MS = 50.0


def _import_module_utils():
    """Import module_utils/* as ansible.module_utils.* the way Ansible does."""
    import ansible.module_utils  # noqa: PLC0415 - after the path set-up in main()

    ansible.module_utils.__path__.append(str(ROOT / "module_utils"))
    from ansible.module_utils.gpunode.driver import gpu as nvidia_gpu  # noqa: PLC0415

    return nvidia_gpu


def _load_make_sysfs():
    spec = importlib.util.spec_from_file_location("make_sysfs", ROOT / "tests" / "simnode" / "make_sysfs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _time(func, runs):
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples), max(samples)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=50)
    args = parser.parse_args(argv)
    nvidia_gpu: types.ModuleType = _import_module_utils()
    make_sysfs = _load_make_sysfs()
    with tempfile.TemporaryDirectory() as tmp:
        make_sysfs.make_tree(make_sysfs.load_spec("hgx-h100"), tmp)
        sysfs, proc = f"{tmp}/sys", f"{tmp}/proc"
        test_ids = str(ROOT / "tests" / "fixtures" / "pci-ids" / "pci.ids")
        cases = [("test pci.ids (tests/fixtures/pci-ids)", test_ids), ("no pci.ids", None)]
        system = nvidia_gpu.find_pci_ids()
        if system:
            cases.insert(0, (f"system pci.ids ({system})", system))
        print("nvidia_gpu_facts logic on the HGX H100 tree (8 GPUs + 4 NVSwitch), "
              f"median of {args.runs} runs:")
        worst = 0.0
        for label, pci_ids in cases:
            facts, _ = nvidia_gpu.gather(sysfs, proc, pci_ids)
            assert facts["gpu_count"] == 8, facts
            median, low, high = _time(lambda p=pci_ids: nvidia_gpu.gather(sysfs, proc, p), args.runs)
            worst = max(worst, median)
            print(f"  {label:55s} median {median:7.2f} ms  (min {low:.2f}, max {high:.2f})")
        verdict = "within" if worst < TARGET_MS else "OVER"
        print(f"  slowest median {worst:.2f} ms: {verdict} the {TARGET_MS:.0f} ms target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
