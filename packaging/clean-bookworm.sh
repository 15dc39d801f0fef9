#!/bin/bash
# Builds the "clean machine" Docker image that tests/e2e/packaging.bats installs gpuprov's .debs
# in: Debian bookworm from mmdebstrap --variant=apt (Essential packages and apt: no compiler, no
# cmake), whose only apt source is a local file repository /repo holding the Debian packages
# that the given package names need, with their dependencies (apt resolves them against the
# image itself, so /repo holds exactly what is missing from it).
#
#   clean-bookworm.sh PKG...              build the image unless it exists; print its tag
#   clean-bookworm.sh --print-tag PKG...  print the tag only (no docker)
#
# The tag is gpuprov-clean-bookworm:<first 12 hex of a sha256 over this script and the sorted
# package names>: the image is built once per dependency set (with network access to the Debian
# mirror, like tests/fixtures/testvm/build-image.sh) and reused from the Docker cache after.
# Why not the host's /var/cache/apt/archives: it holds only what apt downloaded on this host
# (a library that came with the base system, e.g. libboost-filesystem1.74.0 here, is missing,
# and docker-clean style apt rules empty it), so a test built on it fails for host reasons.
# Progress goes to stderr, the tag to stdout (last line).
set -euo pipefail

readonly IMAGE_REPO=gpuprov-clean-bookworm
readonly SUITE=bookworm

log() { printf 'clean-bookworm: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

usage() {
  cat <<'EOF'
usage: clean-bookworm.sh [--print-tag] PKG...
  PKG...       Debian package names the image's /repo must satisfy (with their dependencies)
  --print-tag  print the tag computed from this script and the names, and exit (no docker)
EOF
}

# build_rootfs TAR: the image's root file system as a tar (packages named in GPUPROV_CLEAN_PKGS).
# The customize hooks run on the host with the chroot as $1: apt (configured by mmdebstrap for
# the chroot) downloads the packages and what they need that the chroot lacks; they move to
# /repo with a Packages index; the sources list then names /repo only. mmdebstrap's cleanup
# empties apt's lists and archive cache afterwards.
# mmdebstrap runs with no file descriptor open above 2: one inherited from the caller (this
# script's lock on fd 9, the pipes bats keeps) makes its apt step fail with "Bad fd number".
build_rootfs() {
  local fd
  for fd in /proc/self/fd/*; do
    fd=${fd##*/}
    if ((fd > 2)); then eval "exec $fd>&-"; fi
  done
  # shellcheck disable=SC2016  # $1 and the variables are for the hooks' shell
  mmdebstrap --quiet --mode=root --variant=apt --format=tar \
    --customize-hook='APT_CONFIG="$MMDEBSTRAP_APT_CONFIG" apt-get install --download-only -y -q $GPUPROV_CLEAN_PKGS' \
    --customize-hook='mkdir -p "$1/repo" && find "$1/var/cache/apt/archives" -maxdepth 1 -name "*.deb" -exec mv -t "$1/repo/" {} +' \
    --customize-hook='cd "$1/repo" && dpkg-scanpackages --multiversion . /dev/null > Packages 2>/dev/null && chmod -R a+rX .' \
    --customize-hook='rm -f "$1"/etc/apt/sources.list.d/* && echo "deb [trusted=yes] file:/repo ./" > "$1/etc/apt/sources.list"' \
    "$SUITE" "$1" </dev/null >&2
}

main() {
  local print_only=0
  local -a pkgs=()
  while (($#)); do
    case $1 in
      --print-tag) print_only=1 ;;
      -h | --help)
        usage
        exit 0
        ;;
      -*)
        usage >&2
        exit 2
        ;;
      *)
        [[ $1 =~ ^[a-z0-9][a-z0-9+.-]+$ ]] || die "not a Debian package name: '$1'"
        pkgs+=("$1")
        ;;
    esac
    shift
  done
  ((${#pkgs[@]})) || {
    usage >&2
    exit 2
  }
  local sorted
  sorted=$(printf '%s\n' "${pkgs[@]}" | LC_ALL=C sort -u)
  local hash tag
  hash=$({
    cat -- "${BASH_SOURCE[0]}"
    printf '%s\n' "$sorted"
  } | sha256sum | cut -c1-12)
  tag="$IMAGE_REPO:$hash"
  if ((print_only)); then
    printf '%s\n' "$tag"
    exit 0
  fi

  command -v docker >/dev/null || die "docker CLI not found"
  if docker image inspect "$tag" >/dev/null 2>&1; then
    log "$tag is present (cached)"
    printf '%s\n' "$tag"
    exit 0
  fi
  command -v mmdebstrap >/dev/null || die "mmdebstrap not found (package mmdebstrap)"
  command -v dpkg-scanpackages >/dev/null || die "dpkg-scanpackages not found (package dpkg-dev)"
  ((EUID == 0)) || die "must run as root (mmdebstrap root mode, docker import)"

  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuprov-clean-bookworm.XXXXXX")
  # shellcheck disable=SC2064  # expand tmp now
  trap "rm -rf --one-file-system -- '$tmp'" EXIT
  exec 9>"${TMPDIR:-/tmp}/gpuprov-clean-bookworm-$hash.lock"
  flock 9
  if docker image inspect "$tag" >/dev/null 2>&1; then
    log "$tag was built meanwhile (cached)"
    printf '%s\n' "$tag"
    exit 0
  fi

  local start=$SECONDS
  log "building $tag with mmdebstrap ($SUITE, repo for: $(tr '\n' ' ' <<<"$sorted"))"
  export GPUPROV_CLEAN_PKGS="$sorted"
  # A failed download from the mirror is tried once more before giving up.
  (build_rootfs "$tmp/rootfs.tar") || {
    log "mmdebstrap failed; trying once more"
    (build_rootfs "$tmp/rootfs.tar")
  } || die "mmdebstrap failed twice (is the Debian mirror reachable?)"
  docker import \
    --change 'CMD ["/bin/bash"]' \
    --change "LABEL org.gpuprov.clean-bookworm.recipe=$hash" \
    --message "clean Debian bookworm with a local repository, recipe $hash" \
    "$tmp/rootfs.tar" "$tag" >&2
  log "built $tag in $((SECONDS - start)) s"
  printf '%s\n' "$tag"
}

main "$@"
