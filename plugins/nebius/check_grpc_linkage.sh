#!/bin/sh
# check_grpc_linkage.sh CORE OTHER_DRIVER NEBIUS_DRIVER: fails when the core binary or another
# driver needs libgrpc/libprotobuf (ldd), or when the nebius driver does not (then the check
# would look at the wrong thing).
set -u
core=$1 other=$2 nebius=$3
status=0
for f in "$core" "$other"; do
  if ldd "$f" | grep -E 'lib(grpc|gpr|protobuf)'; then
    echo "FAIL: $f depends on gRPC/protobuf; only the nebius driver may" >&2
    status=1
  fi
done
if ! ldd "$nebius" | grep -q 'libgrpc++'; then
  echo "FAIL: $nebius does not link libgrpc++ (ldd shows it nowhere)" >&2
  status=1
fi
[ "$status" -eq 0 ] && echo "ok: gRPC only in $(basename "$nebius")"
exit "$status"
