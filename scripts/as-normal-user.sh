#!/usr/bin/env bash
# Runs a command (a make target) as a normal user, in that user's own copy of this clone (its tracked files and
# the untracked ones git does not ignore; no virtualenv: the user installs their own), through a login shell,
# as `su - USER` gives it: the user's environment, not root's, except pip's settings (PIP_*: on a machine whose
# pip finds the CPU torch through them, the user's install should too). Needs root; creates the user if missing.
#   scripts/as-normal-user.sh make test-fast       (EVO_USER=evo-ci by default)
set -euo pipefail
(($# > 0)) || { echo "usage: scripts/as-normal-user.sh COMMAND..." >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "scripts/as-normal-user.sh: run it as root (it switches to a normal user)" >&2; exit 2; }
user=${EVO_USER:-evo-ci}
cd "$(dirname "$0")/.."
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
home=$(getent passwd "$user" | cut -d: -f6)
copy="$home/evo"
rm -rf "$copy"
mkdir -p "$copy"
git ls-files -z --cached --others --exclude-standard | tar --null --files-from=- -cf - | tar -xf - -C "$copy"
chown -R "$user:" "$copy"
pip_env=$(env | grep '^PIP_' | sed "s/'/'\\\\''/g; s/=/='/; s/\$/'/" | tr '\n' ' ' || true)
command=$(printf '%q ' "$@")
echo "as $user (uid $(id -u "$user")) in $copy: $command"
su - "$user" -c "cd '$copy' && env $pip_env $command"
