#!/bin/sh
# Copy an example project (primes, the default, or stencil) and its spec to DEST (default
# /tmp/optarena-PROJECT) and make the project a git repository with one commit (the task's
# base), ready for `optarena task freeze`.
#     sh make_repo.sh [DEST] [primes|stencil]
set -e
here="$(cd "$(dirname "$0")" && pwd)"
project="${2:-primes}"
dest="${1:-/tmp/optarena-$project}"
mkdir -p "$dest"
cp -r "$here/$project" "$dest/$project"
cp "$here/$project.toml" "$dest/$project.toml"
cd "$dest/$project"
git init -q
git add -A
git -c user.name=optarena -c user.email=optarena@localhost commit -q -m "$project: base"
echo "$dest/$project is a git repository at $(git rev-parse --short HEAD); spec: $dest/$project.toml"
