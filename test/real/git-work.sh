#!/bin/bash
# A small but real git workload, run by run.sh once plainly and once with the
# allocator preloaded: create a repository, several commits on two branches,
# a merge, log/diff/blame/grep, and gc (which spawns pack-objects, repack,
# prune, ...).  Names, e-mails and dates are fixed, and the repository lives
# at a path given as $1, so that every object id is the same on every run.
# Output goes to stdout/stderr; run.sh compares it between the two runs.
#
# usage: git-work.sh REPO_DIR [SCALE]     (SCALE = number of generated files)
set -euo pipefail
repo=$1
scale=${2:-150}

# Cut the run off from any user/system configuration and fix what would vary.
export HOME=$repo.home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME="Real Test" GIT_AUTHOR_EMAIL="real@example.invalid"
export GIT_COMMITTER_NAME="Real Test" GIT_COMMITTER_EMAIL="real@example.invalid"
export GIT_AUTHOR_DATE="2020-01-01T00:00:00+0000" GIT_COMMITTER_DATE="2020-01-01T00:00:00+0000"
export GIT_PAGER=cat PAGER=cat LC_ALL=C TZ=UTC
unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY

rm -rf "$repo" "$HOME"
mkdir -p "$repo" "$HOME"
cd "$repo"

tick=0
at() {  # advance the fixed clock by one minute per commit
  tick=$((tick + 60))
  export GIT_AUTHOR_DATE="@$((1577836800 + tick)) +0000" GIT_COMMITTER_DATE="@$((1577836800 + tick)) +0000"
}

gen() {  # gen FILE SEED LINES: deterministic text content
  awk -v s="$2" -v n="$3" 'BEGIN { x = s; for (i = 0; i < n; i++) { x = (x * 69069 + 1) % 4294967296; printf "line %d of seed %d: %08x %s\n", i, s, x, substr("the quick brown fox jumps over the lazy dog", x % 20 + 1, 15) } }' > "$1"
}

git init -q -b main .
git config core.autocrlf false
git config gc.auto 0
git config pack.threads 2   # threaded delta search; its exact deltas may vary, so they are not printed

echo "== initial commit"
mkdir -p src docs
for i in $(seq 1 "$scale"); do gen "src/file$i.txt" "$i" $((20 + i % 17)); done
printf '# demo\n\nA repository made by the real-programs test.\n' > README.md
gen docs/guide.txt 999 200
git add -A
at; git commit -q -m "initial import of $scale files"
git rev-parse HEAD

echo "== more commits on main"
for c in 1 2 3 4 5 6; do
  for i in $(seq "$c" 3 "$scale"); do gen "src/file$i.txt" $((i * 10 + c)) $((25 + (i + c) % 13)); done
  echo "change $c" >> README.md
  git add -A
  at; git commit -q -m "main change $c"
done
git rev-parse HEAD

echo "== a feature branch"
git switch -q -c feature HEAD~4
mkdir -p lib
for i in $(seq 1 $((scale / 2))); do gen "lib/mod$i.c" $((i + 5000)) 40; done
git add -A
at; git commit -q -m "feature: add lib"
gen docs/guide.txt 1001 220
git add -A
at; git commit -q -m "feature: rewrite guide"
git rev-parse HEAD

echo "== merge"
git switch -q main
at; git merge --no-ff -m "merge feature" feature
git rev-parse HEAD
git tag -a v1.0 -m "release 1.0"
git rev-parse v1.0

echo "== log"
git log --graph --format='%h %an %ad %s' --date=iso-strict
git log --stat --format='commit %H%n%s' -n 3 | sed -n "1,200p"
echo "== diff and friends"
git diff --stat HEAD~3 HEAD
git diff HEAD~1 HEAD -- README.md docs/guide.txt | sed -n "1,60p"
git diff HEAD~7 HEAD | git patch-id --stable
git blame --line-porcelain README.md | grep -E '^(author |summary )' | sort | uniq -c
git grep -c 'fox' | sed -n "1,20p"
git shortlog -s -n HEAD
git ls-files | wc -l
git rev-list --objects --all | sort | git hash-object --stdin

echo "== gc"
git gc -q --aggressive
git count-objects -v | grep -Ev '^(size-pack|size|size-garbage):'
git verify-pack .git/objects/pack/pack-*.idx && echo 'verify-pack: ok'
git fsck --full --no-progress 2>&1
git rev-parse HEAD main feature v1.0^{commit}
echo "== done"
