# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The verdict of ``dcgmi diag -r LEVEL -j`` per GPU and test.

DCGM 4 writes ``{"DCGM Diagnostic": {"test_categories": [{"category", "tests":
[{"name", "results": [{"entity_group", "entity_id", "status", "warnings":
[{"warning", ...}]}]}]}]}}``; DCGM 3 wrote ``"DCGM GPU Diagnostic"`` with
``"gpu_id"``/``"gpu_ids"`` in place of ``"entity_id"``
(https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html).
A status is ``Pass``, ``Fail``, ``Warn``, ``Skip`` or ``Not Run``; only ``Fail``
fails a GPU.

Standard library only; Python 3.8+ (runs on managed nodes).
"""

import json


class DcgmError(Exception):
    """dcgmi said something that is not its JSON report."""


def _document(text):
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise DcgmError(f"dcgmi diag: no JSON report in its output ({' '.join(text.split())[:200]!r})")
    try:
        data = json.loads(text[start:end + 1])
    except ValueError as exc:
        raise DcgmError(f"dcgmi diag: its report is not JSON ({exc})") from None
    body = data.get("DCGM Diagnostic") or data.get("DCGM GPU Diagnostic") if isinstance(data, dict) else None
    if not isinstance(body, dict):
        raise DcgmError("dcgmi diag: no 'DCGM Diagnostic' object in its report")
    return body


def _tests(body):
    for category in body.get("test_categories") or [{"tests": body.get("tests") or []}]:
        yield from category.get("tests") or []


def _gpus(result):
    if result.get("entity_group", "GPU") != "GPU":
        return []
    ids = result.get("entity_id", result.get("gpu_id", result.get("gpu_ids")))
    if isinstance(ids, int):
        return [ids]
    return [int(part) for part in str(ids).replace(" ", "").split(",") if part.isdigit()]


def parse_diag(text):
    """{gpu index: [{"test", "status", "message"}]} from dcgmi's JSON report."""
    verdicts = {}
    for test in _tests(_document(text)):
        for result in test.get("results") or []:
            warnings = [w.get("warning", "") for w in result.get("warnings") or [] if isinstance(w, dict)]
            for gpu in _gpus(result):
                verdicts.setdefault(gpu, []).append({
                    "test": test.get("name", "?"),
                    "status": str(result.get("status", "?")),
                    "message": "; ".join(w for w in warnings if w),
                })
    return verdicts
