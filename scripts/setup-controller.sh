#!/usr/bin/env bash
# Set up a controller to run gpunode against real hosts: a virtualenv (.venv)
# with requirements.txt (ansible-core, Jinja2, PyYAML, the kubernetes client)
# and the collections of requirements.yml, taken from the pinned, hash-checked
# ansible wheel on PyPI (no Galaxy access needed). Nothing else: no Docker, no
# test stack (that is scripts/bootstrap.sh, for `make demo` and `make test`).
# Safe to re-run.
#   bash scripts/setup-controller.sh && . .venv/bin/activate
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup-controller: ansible-core 2.19 needs Python 3.11 or newer on the controller ($PYTHON is $("$PYTHON" -V 2>&1))" >&2
  exit 1
fi
if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
  echo "setup-controller: $PYTHON cannot create virtualenvs; install python3-venv (Debian, Ubuntu) first" >&2
  exit 1
fi
[[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r requirements.txt
"$VENV/bin/python" scripts/install-collections.py
echo "setup-controller: ready; run: . $VENV/bin/activate"
