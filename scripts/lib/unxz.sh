# Sourced by the scripts that unpack committed xz files (scripts/demo/unpack.sh).
command -v xz >/dev/null || { echo "$(basename "$0"): needs xz (xz-utils)" >&2; exit 1; }

# unxz_checked SRC.xz SHA256 OUT: decompresses SRC.xz into OUT (written beside it, renamed at the
# end), failing, OUT untouched, unless the result's sha256 is SHA256.
unxz_checked() {
  xz -dc "$1" >"$3.tmp"
  local got
  got=$(sha256sum "$3.tmp" | cut -d' ' -f1)
  if [[ $got != "$2" ]]; then
    rm -f "$3.tmp"
    echo "$(basename "$0"): $3: sha256 $got, want $2" >&2
    return 1
  fi
  mv "$3.tmp" "$3"
}
