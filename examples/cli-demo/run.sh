#!/bin/sh
# The sp4rk command fixes a failing test: a scripted model, real tools, the live view, then
# the run's trajectory. Usage: run.sh [OUT_DIR]   (SP4RK names the command; default: sp4rk)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
sp4rk=${SP4RK:-sp4rk}
out=${1:-.demo}
rm -rf "$out"
mkdir -p "$out"
cp -R "$here/workspace" "$out/workspace"
$sp4rk run "The tests fail. Find the bug in calc.py and fix it." \
    --workspace "$out/workspace" \
    --model "scripted:$here/script.json" \
    --approve auto \
    --verify "python3 -m unittest -q" \
    --store "$out/runs.db"
echo
$sp4rk show last --store "$out/runs.db"
