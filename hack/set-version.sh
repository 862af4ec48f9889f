#!/usr/bin/env bash
# The release version, everywhere the charts carry it:
#
#   hack/set-version.sh v0.2.0           # write it
#   hack/set-version.sh --check v0.2.0   # exit 2 naming every place that differs
#   hack/set-version.sh --print          # each place and the version it holds
#
# A version is vX.Y.Z. The places are the three charts' Chart.yaml `version`
# (X.Y.Z) and `appVersion` (vX.Y.Z), the example chart's dependency on the
# library (X.Y.Z), the library's default sidecar image tag
# (templates/_config.tpl), the example chart's sidecar and app image tags
# and the injector's image tag (values.yaml), all vX.Y.Z, so the default
# images are the release's own.
# Writing also replaces the old version in the charts' READMEs (their
# install commands and dependency snippets). hack/release.sh runs --check.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lib=charts/leader-sidecar-lib
example=charts/leader-sidecar-example
injector=charts/leader-sidecar-injector
log() { echo "set-version: $*" >&2; }
usage() { log "usage: hack/set-version.sh [--check] vX.Y.Z | --print"; exit 2; }

# Each place: FILE, the form it takes (chart: X.Y.Z, app: vX.Y.Z), its name
# in messages, a path of line patterns that leads to it (tab-separated, each
# matched after the one before, within one top-level section), and the key
# line itself.
places=(
  "$lib/Chart.yaml|chart|version||^version:"
  "$lib/Chart.yaml|app|appVersion||^appVersion:"
  "$lib/templates/_config.tpl|app|default sidecar.image.tag|^image:|^  tag:"
  "$example/Chart.yaml|chart|version||^version:"
  "$example/Chart.yaml|app|appVersion||^appVersion:"
  "$example/Chart.yaml|chart|the version of dependency leader-sidecar-lib|^  - name: leader-sidecar-lib$|^    version:"
  "$example/values.yaml|app|app.image.tag|^app:	^  image:|^    tag:"
  "$example/values.yaml|app|sidecar.image.tag|^sidecar:	^  image:|^    tag:"
  "$injector/Chart.yaml|chart|version||^version:"
  "$injector/Chart.yaml|app|appVersion||^appVersion:"
  "$injector/values.yaml|app|image.tag|^image:|^  tag:"
)

# locate MODE PATH KEY [NEW] < file: MODE read prints the value at the place;
# MODE write prints the file with the value replaced by NEW (quotes kept).
# Exits 3 when the place is not found.
locate() {
  awk -v mode="$1" -v path="$2" -v key="$3" -v new="${4:-}" '
    BEGIN { n = (path == "") ? 0 : split(path, pats, "\t"); i = 0 }
    !done && i > 0 && /^[^ #]/ && $0 !~ pats[1] { i = 0 }
    !done && i < n && $0 ~ pats[i + 1] { i++ }
    !done && i == n && $0 ~ key {
      done = 1
      line = $0
      sub(/[ \t]+#.*$/, "", line)
      value = line
      sub(/^[^:]*:[ \t]*/, "", value)
      if (mode == "read") { gsub(/"/, "", value); print value; exit }
      q = (value ~ /^"/) ? "\"" : ""
      match($0, /^[^:]*:[ \t]*/)
      print substr($0, 1, RLENGTH) q new q
      next
    }
    mode == "write" { print }
    END { if (!done) exit 3 }
  '
}

# read PLACE: the version a place holds.
read_place() {
  local file form name path key
  IFS='|' read -r file form name path key <<<"$1"
  locate read "$path" "$key" <"$root/$file" || { log "$file: cannot find $name"; exit 1; }
}

valid() { [[ $1 =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]]; }

mode=write
case ${1:-} in
--check) mode=check; shift ;;
--print) mode=print; shift ;;
-*) usage ;;
esac
if [[ $mode == print ]]; then
  [[ $# == 0 ]] || usage
  for p in "${places[@]}"; do
    IFS='|' read -r file _ name _ <<<"$p"
    printf '%s: %s: %s\n' "$file" "$name" "$(read_place "$p")"
  done
  exit 0
fi
[[ $# == 1 ]] || usage
version=$1
valid "$version" || { log "version \"$version\" is not of the form vX.Y.Z (for example v1.2.3)"; exit 2; }

want() { if [[ $1 == chart ]]; then echo "${version#v}"; else echo "$version"; fi; }

if [[ $mode == check ]]; then
  bad=0
  for p in "${places[@]}"; do
    IFS='|' read -r file form name _ <<<"$p"
    got=$(read_place "$p")
    if [[ $got != "$(want "$form")" ]]; then
      log "$file: $name is $got, not $(want "$form") (run hack/set-version.sh $version)"
      bad=1
    fi
  done
  [[ $bad == 0 ]] || exit 2
  log "every place holds $version"
  exit 0
fi

old=$(read_place "${places[1]}") # the library's appVersion
for p in "${places[@]}"; do
  IFS='|' read -r file form name path key <<<"$p"
  tmp=$(mktemp "$root/$file.XXXXXX")
  if ! locate write "$path" "$key" "$(want "$form")" <"$root/$file" >"$tmp"; then
    rm -f "$tmp"
    log "$file: cannot find $name"
    exit 1
  fi
  chmod --reference="$root/$file" "$tmp"
  mv "$tmp" "$root/$file"
done
if valid "$old" && [[ $old != "$version" ]]; then
  # The READMEs' commands and snippets name the version: vX.Y.Z and X.Y.Z.
  for readme in "$lib/README.md" "$example/README.md" "$injector/README.md"; do
    OLD=${old#v} NEW=${version#v} perl -pi -e 's/(?<![\w.])(v?)\Q$ENV{OLD}\E(?![0-9]|\.[0-9])/$1$ENV{NEW}/g' "$root/$readme"
  done
fi
log "set $version (was $old)"
