# Sourced by the scripts: the environment a host process of manypy runs in.
#
# More than five interpreters with torch need more optional static TLS than
# glibc reserves by default; glibc reads this only when a process starts, so
# a host (a JVM, a Go binary, these tests) must be started with it
# (docs/isolation.md, hazard 4). Kept if the caller already set tunables.
if [[ "${GLIBC_TUNABLES:-}" != *optional_static_tls* ]]; then
  export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.rtld.optional_static_tls=16384"
fi
