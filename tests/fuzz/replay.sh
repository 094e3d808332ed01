#!/bin/sh
# Replay a harness's checked-in corpus: run HARNESS once on every file of CORPUS_DIR and fail
# on any crash, sanitizer report or failed check (each aborts the harness), or an empty corpus.
# usage: replay.sh HARNESS CORPUS_DIR
set -eu
harness=$1
dir=$2
n=$(find "$dir" -type f | wc -l)
if [ "$n" -eq 0 ]; then
	echo "replay: no inputs in $dir" >&2
	exit 1
fi
# libFuzzer runs each file argument once (no fuzzing); standalone.c's main does the same.
find "$dir" -type f -print0 | sort -z | xargs -0 "$harness" -runs=1
echo "replay: $n inputs of $dir passed"
