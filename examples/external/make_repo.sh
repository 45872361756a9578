#!/bin/sh
# Copy the example project and its spec to DEST (default /tmp/optarena-primes) and make the
# project a git repository with one commit (the task's base), ready for `optarena task freeze`.
set -e
here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:-/tmp/optarena-primes}"
mkdir -p "$dest"
cp -r "$here/primes" "$dest/primes"
cp "$here/primes.toml" "$dest/primes.toml"
cd "$dest/primes"
git init -q
git add -A
git -c user.name=optarena -c user.email=optarena@localhost commit -q -m "primes: base"
echo "$dest/primes is a git repository at $(git rev-parse --short HEAD); spec: $dest/primes.toml"
