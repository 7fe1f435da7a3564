#!/usr/bin/env bash
# completion.sh STAGESCOPE: `stagescope completion bash` loaded into bash completes what the
# command line defines: the commands `--help` lists, a command's options, and file names after
# an option that takes a value.  Each case prints what it got when it fails.
set -u
exe=$1
fail=0
eval "$("$exe" completion bash)" || { echo "FAIL: the bash script does not load"; exit 1; }
work=$(mktemp -d) && cd "$work" || exit 1
trap 'rm -rf "$work"' EXIT
touch report.html run.db

complete_words() {  # complete_words WORD...: COMPREPLY for the last word
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  _stagescope
  echo "${COMPREPLY[*]}"
}
expect() {  # expect WANT GOT WHAT
  if [ "$1" != "$2" ]; then
    echo "FAIL: $3: expected '$1', got '$2'"
    fail=1
  fi
}

expect "check" "$(complete_words stagescope ch)" "a command by its prefix"
expect "--json --junit" "$(complete_words stagescope check run.db --j | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//')" \
  "check's options"
expect "--keep-shards" "$(complete_words stagescope merge run.db --k)" "merge's flag"
expect "report.html" "$(complete_words stagescope compare a.db b.db --html rep)" \
  "a file name after an option that takes one"
expect "run.db" "$(complete_words stagescope check ru)" "a file name as an argument"
# Every command `--help` lists is offered, and nothing else that is not an option.
listed=$("$exe" --help | awk '/^Subcommands:/{on=1; next} on && /^  [a-z]/{print $1}' | sort | tr '\n' ' ')
offered=$(complete_words stagescope "" | tr ' ' '\n' | grep -v '^-' | sort | tr '\n' ' ')
[ -n "$listed" ] || { echo "FAIL: no command found in --help"; fail=1; }
expect "$listed" "$offered" "the commands of --help"
if command -v zsh >/dev/null; then
  "$exe" completion zsh >script.zsh &&
    zsh -c 'source ./script.zsh && whence -w _stagescope' >/dev/null ||
    { echo "FAIL: the zsh script does not load"; fail=1; }
fi
"$exe" completion fish >/dev/null 2>err.txt
expect 2 $? "an unknown shell is a usage error"
[ $fail -eq 0 ] && echo "ok: completion"
exit $fail
