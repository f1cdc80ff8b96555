#!/usr/bin/env bash
# Build the project's Dockerfile as attention-explorer:local with Docker or podman (`make image`).
#
#   scripts/image.sh              pick an engine, a base image and a requirements file; build
#   scripts/image.sh --setup      only set up the engine and the base image, and say what a build would use
#
# Environment: IMAGE (tag, default attention-explorer:local), ENGINE (docker|podman), BASE (the
# base image; default: the Dockerfile's own, python:3.11-slim), REQUIREMENTS (default:
# requirements-cpu.txt when the PyTorch CPU index answers, else requirements.txt).
#
# The engine: a running Docker daemon, else podman. Where neither runs and apt-get may be used
# (root, or sudo without a password), podman, runc and mmdebstrap are installed from Debian,
# and podman gets the settings it needs in a container without systemd (crun fails on
# RLIMIT_NOFILE and hybrid cgroups; runc refuses nproc >= 65536).
#
# The base: when no registry answers (python:3.11-slim cannot be pulled), a local base is made
# once from Debian's archive, as apt is configured here: a minbase root filesystem with Python
# (mmdebstrap), imported as localhost/debian-python:local. The Dockerfile makes a venv either
# way (Debian's Python refuses system-wide pip installs).
#
# Pip inside the build (podman only): the host's pip configuration (`pip config list`, written
# out as one file) and every file or folder it names (CA bundle, find-links, local indexes)
# are read-only build volumes, so the build installs as the host does and none of it lands in
# the image.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-attention-explorer:local}
LOCAL_BASE=localhost/debian-python:local
DEFAULT_BASE=$(sed -n 's/^ARG BASE=//p' Dockerfile | head -n 1)
CPU_INDEX_HOST=download.pytorch.org
SETUP_ONLY=0
[[ ${1:-} == --setup ]] && SETUP_ONLY=1

say() { echo "image: $*" >&2; }
die() { say "$*"; exit 1; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo "$@"
  else return 1
  fi
}

# podman's system settings for a container without systemd, written only where the system has
# none of its own (a fresh install).
configure_podman() {
  local conf=/etc/containers/containers.conf
  if [[ -e $conf ]]; then
    grep -q '^runtime *= *"runc"' "$conf" || say "keeping $conf as it is (no runc setting in it)"
    return 0
  fi
  as_root mkdir -p /etc/containers
  as_root tee "$conf" >/dev/null <<'EOF'
# Written by Attention Explorer's scripts/image.sh: podman in a container without systemd.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  say "wrote $conf (runc, cgroupfs, file events, ulimits)"
}

install_podman() {
  command -v apt-get >/dev/null 2>&1 || die "no Docker daemon and no podman; install one of them"
  say "installing podman, runc and mmdebstrap from Debian"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap \
    >/dev/null || { as_root apt-get update -qq &&
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc mmdebstrap \
    >/dev/null; } || die "could not install podman (needs root or sudo, and apt)"
}

pick_engine() {
  if [[ -n ${ENGINE:-} ]]; then echo "$ENGINE"; return; fi
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then echo docker; return; fi
  command -v podman >/dev/null 2>&1 || install_podman
  configure_podman
  echo podman
}

# The sources file of the Debian archive apt uses for this release.
debian_sources() {
  local suite=$1 f
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list; do
    [[ -f $f ]] || continue
    if grep -qE "^(Suites:.*[[:space:]]$suite([[:space:]]|$)|deb[[:space:]].*[[:space:]]$suite[[:space:]])" "$f" &&
       grep -q "debian" "$f"; then
      echo "$f"; return
    fi
  done
}

make_local_base() {
  local engine=$1 suite dir sources
  command -v mmdebstrap >/dev/null 2>&1 || install_podman
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  sources=$(debian_sources "$suite")
  [[ -n $sources ]] || die "no Debian archive for $suite in apt's sources"
  dir=$(mktemp -d)
  say "making $LOCAL_BASE: Debian $suite minbase with Python, from $sources"
  # python3-venv brings the wheels a venv starts with (no python3-pip: the image's pip is the
  # venv's); no manual pages, translations or docs besides the copyright files
  as_root mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "$suite" "$dir" "$sources"
  as_root tar -C "$dir" -c . | "$engine" import - "$LOCAL_BASE" >/dev/null
  as_root rm -rf "$dir"
}

pick_base() {
  local engine=$1
  if [[ -n ${BASE:-} ]]; then echo "$BASE"; return; fi
  if "$engine" image inspect "$DEFAULT_BASE" >/dev/null 2>&1 ||
     timeout 120 "$engine" pull -q "$DEFAULT_BASE" >/dev/null 2>&1; then
    echo "$DEFAULT_BASE"; return
  fi
  say "$DEFAULT_BASE cannot be pulled (no registry answers): using $LOCAL_BASE"
  "$engine" image inspect "$LOCAL_BASE" >/dev/null 2>&1 || make_local_base "$engine"
  echo "$LOCAL_BASE"
}

pick_requirements() {
  if [[ -n ${REQUIREMENTS:-} ]]; then echo "$REQUIREMENTS"; return; fi
  if python3 -c "import socket; socket.getaddrinfo('$CPU_INDEX_HOST', 443)" 2>/dev/null; then
    echo requirements-cpu.txt
  else
    say "the PyTorch CPU index does not answer: requirements.txt (the build fails if torch is not a CPU build)"
    echo requirements.txt
  fi
}

# -v SRC:SRC:ro for the host's pip configuration, merged into one file, and what it names.
pip_volumes() {
  local conf=$1 pip=(python3 -m pip) line key value path
  "${pip[@]}" --version >/dev/null 2>&1 || return 0
  echo "[global]" >"$conf"
  declare -A seen=()
  while IFS= read -r line; do          # scope.key='value'; later scopes win (env last)
    key=${line%%=*}; key=${key#*.}; value=${line#*=}; value=${value#\'}; value=${value%\'}
    [[ $key == *.* || -z $key ]] && continue
    seen[$key]=$value
  done < <("${pip[@]}" config list 2>/dev/null)
  for key in "${!seen[@]}"; do
    echo "$key = ${seen[$key]}" >>"$conf"
    for path in ${seen[$key]}; do
      path=${path#file://}
      [[ $path == */simple ]] && path=${path%/simple}   # an index's links lead beside it
      [[ $path == /* && -e $path ]] && echo "--volume=$path:$path:ro"
    done
  done | sort -u
  echo "--volume=$conf:/etc/pip.conf:ro"
}

main() {
  local engine base requirements start took
  engine=$(pick_engine)
  base=$(pick_base "$engine")
  requirements=$(pick_requirements)
  say "engine $engine, base $base, $requirements, tag $IMAGE"
  [[ $SETUP_ONLY -eq 1 ]] && return 0
  local args=(build -t "$IMAGE" --build-arg "BASE=$base" --build-arg "REQUIREMENTS=$requirements")
  if [[ $engine == podman ]]; then
    # docker format keeps the HEALTHCHECK; the host network reaches what the host's pip does
    args+=(--format docker --network=host)
    PIP_CONF=$(mktemp)
    trap 'rm -f "$PIP_CONF"' EXIT
    mapfile -t volumes < <(pip_volumes "$PIP_CONF")
    args+=("${volumes[@]}")
  fi
  say "$engine ${args[*]} ."
  start=$(date +%s)
  "$engine" "${args[@]}" . || die "the build failed"
  took=$(( $(date +%s) - start ))
  say "built $IMAGE in ${took} s; run it with"
  say "  $engine run --rm -p 8501:8501 --read-only --tmpfs /tmp:size=256m --memory 2g $IMAGE"
}

main
