#!/usr/bin/env bash
# Writes the .cargo-checksum.json that makes an unpacked crate a member of a
# Cargo directory source, as `cargo vendor` writes it:
#   cargo_checksum.sh <unpacked crate dir> <its .crate file>
# "package" is the .crate's SHA-256, which lockfiles record for registry
# crates (so a lockfile made against the registry still matches); "files"
# maps each file to its SHA-256, which cargo checks before building.
# (cargo vendor makes this only for crates it resolves from a registry; ours
# are not published yet, hence this script.)
set -euo pipefail

if (($# != 2)); then
  echo "usage: cargo_checksum.sh <unpacked crate dir> <crate file>" >&2
  exit 2
fi
dir="$1"
package="$(sha256sum "$2" | cut -d' ' -f1)"

files=()
while IFS= read -r -d '' path; do
  path="${path#./}"
  # JSON strings as written here: a path with a quote, a backslash or a
  # control character would need escaping, and a crate of ours has none.
  if [[ "$path" =~ [\"\\[:cntrl:]] ]]; then
    echo "cargo_checksum.sh: cannot quote the file name '$path' in JSON" >&2
    exit 1
  fi
  files+=("\"$path\":\"$(sha256sum "$dir/$path" | cut -d' ' -f1)\"")
done < <(cd "$dir" && find . -type f ! -name .cargo-checksum.json -print0 | sort -z)

(IFS=,; printf '{"files":{%s},"package":"%s"}\n' "${files[*]}" "$package") > "$dir/.cargo-checksum.json"
