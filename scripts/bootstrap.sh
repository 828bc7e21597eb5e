#!/usr/bin/env bash
# Set up everything `make demo` and `make test` need on a Debian 12 machine:
# Debian packages (Docker engine, debootstrap, venv, dpkg tools), a running
# Docker engine, a virtualenv with the pinned Python packages, and the
# collections. Safe to re-run: each step is skipped when already done.
#   VENV=.venv (default)   the project's environment: the oldest ansible-core of the
#                          supported range and the test stack (requirements-dev.txt), python3
#   VENV=.venv-newest      the newest ansible-core of the range (requirements-newest.txt)
#                          on Python 3.12, pyenv's or python3.12 on PATH (make bootstrap-newest)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
if [[ $VENV == .venv-newest ]]; then
  REQUIREMENTS=${REQUIREMENTS:-requirements-newest.txt}
  if [[ -z ${PYTHON:-} ]]; then  # found the way make unit finds its interpreters
    PYTHON=$(python3 scripts/unit-tests.py --interpreter 3.12) || {
      echo "bootstrap: $VENV needs Python 3.12 (ansible-core 2.21's oldest controller Python): none in" \
        "pyenv or on PATH" >&2
      exit 1
    }
  fi
fi
REQUIREMENTS=${REQUIREMENTS:-requirements-dev.txt}
PYTHON=${PYTHON:-python3}

need_apt=()
# rpmbuild, createrepo_c and dnf: the offline bundle's EL test builds and reads RPM repositories
for pair in dockerd:docker.io runc:runc debootstrap:debootstrap dpkg-scanpackages:dpkg-dev \
            gpg:gpg rsync:rsync rpmbuild:rpm createrepo_c:createrepo-c dnf:dnf; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need_apt+=("${pair#*:}")
done
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
if ((${#need_apt[@]})); then
  if [[ $(id -u) != 0 ]]; then
    echo "bootstrap: missing ${need_apt[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "bootstrap: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# Exactly one Docker engine: use the running one, else start one detached.
if ! docker info >/dev/null 2>&1; then
  if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
    systemctl start docker
  else
    echo "bootstrap: starting dockerd (log: /var/log/gpunode-dockerd.log)"
    setsid nohup dockerd >/var/log/gpunode-dockerd.log 2>&1 </dev/null &
  fi
  timeout 60 sh -c 'until docker info >/dev/null 2>&1; do sleep 0.5; done' || {
    echo "bootstrap: the Docker engine did not start" >&2
    tail -n 20 /var/log/gpunode-dockerd.log >&2 || true
    exit 1
  }
fi

# uv makes the virtualenvs (this one and make unit's): hash-pinned in requirements-tools.txt,
# installed once into .cache/tools by the system Python's pip
UV=.cache/tools/bin/uv
tools_want=$(sha256sum <requirements-tools.txt)
if [[ ! -x $UV || $(cat .cache/tools/.requirements.sha256 2>/dev/null) != "$tools_want" ]]; then
  echo "bootstrap: installing uv into .cache/tools (requirements-tools.txt)"
  rm -rf .cache/tools
  python3 -m venv .cache/tools
  .cache/tools/bin/pip install --quiet --disable-pip-version-check --require-hashes -r requirements-tools.txt
  echo "$tools_want" >.cache/tools/.requirements.sha256
fi

stamp="$VENV/.requirements.sha256"
want=$(cat requirements.txt "$REQUIREMENTS" requirements-collections.txt requirements.yml | sha256sum)
if [[ ! -x $VENV/bin/python || ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  echo "bootstrap: creating $VENV with pinned packages ($REQUIREMENTS, $("$PYTHON" --version))"
  # --seed: pip inside too (install-collections.py, ansible-test, the docs' commands use it)
  "$UV" venv --quiet --clear --seed --python "$PYTHON" "$VENV"
  "$UV" pip install --quiet --python "$VENV/bin/python" -r "$REQUIREMENTS"
  "$VENV/bin/python" scripts/install-collections.py
  echo "$want" >"$stamp"
fi
