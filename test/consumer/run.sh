#!/usr/bin/env bash
# run.sh RELEASE_BUILD DEBUG_BUILD OUT -- the library as its users get it.
#
# Installs a release and a debug build (configured with the default layout)
# into one staging prefix, OUT/prefix, prints its tree and `readelf -d` of the
# shared library, checks the layout, and builds and runs consumers of it:
#   (a) a C program built with `pkg-config --cflags --libs mimalloc` (and
#       mimalloc-debug) and run with only LD_LIBRARY_PATH=<prefix>/lib; a C and
#       a C++ program (with mimalloc-new-delete.h) linked with libmimalloc.a;
#   (b) the library installed into the system prefix /usr/local, inside a
#       private mount namespace (overlays on /usr/local and /etc that vanish
#       with it): `cc app.c -lmimalloc` with no flags at all, run with no
#       environment, pkg-config and find_package with no search path;
#   (c) a CMake project using find_package(mimalloc) and mimalloc::mimalloc
#       (and mimalloc::mimalloc-static, the 1.6 name, the object file), as a
#       Release and as a Debug build (each must pick its library);
#   and the versioned layout (MI_INSTALL_VERSIONED=ON) with pkg-config and CMake.
# Ends with "consumer: N passed, N failed".
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
unset LD_PRELOAD LD_LIBRARY_PATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH MIMALLOC_VERBOSE MIMALLOC_SHOW_STATS || true

passed=0
failed=0
logn=0

# check DESCRIPTION COMMAND...: run the command (output to a log), count it.
check() {
  local what=$1; shift
  logn=$((logn + 1))
  local log="$logdir/$logn.txt"
  if "$@" > "$log" 2>&1; then
    passed=$((passed + 1)); echo "  ok    $what"
  else
    failed=$((failed + 1)); echo "  FAIL  $what"; sed 's/^/      | /' "$log" | tail -40
  fi
}

# runs PROGRAM EXPECTED-LINE...: run it, its output must contain every line.
runs() {
  local prog=$1; shift
  local output
  output=$("$prog" 2>&1) || { echo "$output"; echo "exit code $?"; return 1; }
  echo "$output"
  for line in "$@"; do
    grep -qx -- "$line" <<< "$output" || { echo "missing line: $line"; return 1; }
  done
}

needed() { readelf -d "$1" | grep '(NEEDED)'; readelf -d "$1" | grep -q "Shared library: \[$2\]"; }
not_needed() { ! readelf -d "$1" | grep -q "Shared library: \[libmimalloc"; }
symlink_is() { [ "$(readlink "$1")" = "$2" ] || { echo "$1 -> $(readlink "$1"), expected $2"; return 1; }; }
soname_is() { readelf -d "$1" | grep -q "Library soname: \[$2\]" || { readelf -d "$1" | grep SONAME; return 1; }; }
has_file() { [ -f "$1" ] || { echo "missing: $1"; return 1; }; }

# cmake_consumer DIR BUILD_TYPE PREFIX-PATH(may be empty): configure and build test/consumer/cmake
cmake_consumer() {
  local dir=$1 type=$2 prefix=$3
  local args=(-S "$here/cmake" -B "$dir" -DCMAKE_BUILD_TYPE="$type")
  [ -n "$prefix" ] && args+=(-DCMAKE_PREFIX_PATH="$prefix")
  if command -v ninja >/dev/null; then args+=(-G Ninja); fi
  cmake "${args[@]}" && cmake --build "$dir"
}

# ---------------------------------------------------------------------------
# (b) inside the private mount namespace: `run.sh --system RELEASE_BUILD OUT`
# ---------------------------------------------------------------------------
if [ "${1:-}" = "--system" ]; then
  rel=$2 out=$3
  logdir="$out/system/log"
  scratch="$out/system/scratch"
  mkdir -p "$scratch" "$logdir"
  mount -t tmpfs tmpfs "$scratch" || exit 77
  for d in /usr/local /etc; do
    name=$(basename "$d")
    mkdir -p "$scratch/$name-upper" "$scratch/$name-work"
    mount -t overlay overlay -o "lowerdir=$d,upperdir=$scratch/$name-upper,workdir=$scratch/$name-work" "$d" || exit 77
  done
  echo "(b) the system prefix /usr/local (private mount namespace)"
  check "install into /usr/local, ldconfig" bash -c "cmake --install '$rel' --prefix /usr/local && ldconfig"
  check "ldconfig knows libmimalloc.so.1" bash -c "ldconfig -p | grep -F 'libmimalloc.so.1 ' | grep -F /usr/local/lib/"
  check "cc app.c -lmimalloc (no flags)" cc "$here/app.c" -lmimalloc -o "$out/system/app"
  check "  links libmimalloc.so.1" needed "$out/system/app" libmimalloc.so.1
  check "  runs with no environment" runs "$out/system/app" ok malloc_is_ours=1 debug=0
  check "pkg-config (no PKG_CONFIG_PATH)" bash -c "pkg-config --cflags --libs mimalloc | tee /dev/stderr | grep -q -- '-lmimalloc'"
  check "CMake find_package (no CMAKE_PREFIX_PATH)" cmake_consumer "$out/system/cmake" Release ""
  check "  found in /usr/local" grep -q "^mimalloc_DIR:PATH=/usr/local/lib/cmake/mimalloc$" "$out/system/cmake/CMakeCache.txt"
  check "  app-shared runs with no environment" runs "$out/system/cmake/app-shared" ok malloc_is_ours=1 debug=0
  echo "system: $passed passed, $failed failed"
  [ $failed -eq 0 ]
  exit
fi

# ---------------------------------------------------------------------------
# The staging prefix
# ---------------------------------------------------------------------------
rel=$(cd "${1:?usage: run.sh RELEASE_BUILD DEBUG_BUILD OUT}" && pwd)
dbg=$(cd "${2:?usage: run.sh RELEASE_BUILD DEBUG_BUILD OUT}" && pwd)
out=${3:?usage: run.sh RELEASE_BUILD DEBUG_BUILD OUT}
rm -rf "$out"
mkdir -p "$out/log"
out=$(cd "$out" && pwd)
logdir="$out/log"
stage="$out/prefix"

echo "== install a release and a debug build into $stage"
check "cmake --install (release)" cmake --install "$rel" --prefix "$stage"
check "cmake --install (debug)" cmake --install "$dbg" --prefix "$stage"
echo "-- find $stage | sort"
(cd "$out" && find prefix | sort)
echo "-- readelf -d $stage/lib/libmimalloc.so.1.6"
readelf -d "$stage/lib/libmimalloc.so.1.6"

echo "== layout"
for f in include/mimalloc.h include/mimalloc-override.h include/mimalloc-new-delete.h \
         lib/libmimalloc.so.1.6 lib/libmimalloc.a lib/mimalloc.o \
         lib/libmimalloc-debug.so.1.6 lib/libmimalloc-debug.a lib/mimalloc-debug.o \
         lib/pkgconfig/mimalloc.pc lib/pkgconfig/mimalloc-debug.pc \
         lib/cmake/mimalloc/mimalloc-config.cmake lib/cmake/mimalloc/mimalloc-config-version.cmake \
         share/doc/mimalloc/LICENSE; do
  check "$f" has_file "$stage/$f"
done
for v in mimalloc mimalloc-debug; do
  check "lib/lib$v.so -> lib$v.so.1 -> lib$v.so.1.6" \
    bash -c "$(declare -f symlink_is); symlink_is '$stage/lib/lib$v.so' lib$v.so.1 && symlink_is '$stage/lib/lib$v.so.1' lib$v.so.1.6"
  check "SONAME lib$v.so.1" soname_is "$stage/lib/lib$v.so.1.6" "lib$v.so.1"
done

echo "== (a) pkg-config, LD_LIBRARY_PATH only"
export PKG_CONFIG_PATH="$stage/lib/pkgconfig"
check "pkg-config --cflags --libs mimalloc" bash -c "pkg-config --cflags --libs mimalloc | tee /dev/stderr | grep -qx -- '-I$stage/include -L$stage/lib -lmimalloc *'"
check "cc app.c \$(pkg-config --cflags --libs mimalloc)" bash -c "cc '$here/app.c' \$(pkg-config --cflags --libs mimalloc) -o '$out/app-pc'"
check "  links libmimalloc.so.1" needed "$out/app-pc" libmimalloc.so.1
check "  runs with LD_LIBRARY_PATH=<prefix>/lib" env LD_LIBRARY_PATH="$stage/lib" bash -c "$(declare -f runs); runs '$out/app-pc' ok malloc_is_ours=1 debug=0"
check "cc app.c \$(pkg-config --cflags --libs mimalloc-debug)" bash -c "cc '$here/app.c' \$(pkg-config --cflags --libs mimalloc-debug) -o '$out/app-pc-debug'"
check "  links libmimalloc-debug.so.1" needed "$out/app-pc-debug" libmimalloc-debug.so.1
check "  runs the debug build" env LD_LIBRARY_PATH="$stage/lib" bash -c "$(declare -f runs); runs '$out/app-pc-debug' ok malloc_is_ours=1 debug=1"
check "cc app.c libmimalloc.a (and the libraries of pkg-config --static --libs mimalloc)" \
  bash -c "cc '$here/app.c' \$(pkg-config --cflags mimalloc) '$stage/lib/libmimalloc.a' \$(pkg-config --static --libs mimalloc | sed 's/-L[^ ]*//; s/-lmimalloc//') -o '$out/app-static'"
check "  needs no libmimalloc.so" not_needed "$out/app-static"
check "  runs" runs "$out/app-static" ok malloc_is_ours=1 debug=0
check "c++ app.cpp (mimalloc-new-delete.h) libmimalloc.a" bash -c "c++ '$here/app.cpp' \$(pkg-config --cflags mimalloc) '$stage/lib/libmimalloc.a' -pthread -o '$out/app-cxx-static'"
check "  runs" runs "$out/app-cxx-static" ok
check "c++ app.cpp (mimalloc-new-delete.h) mimalloc.o" bash -c "c++ '$stage/lib/mimalloc.o' '$here/app.cpp' \$(pkg-config --cflags mimalloc) -pthread -o '$out/app-cxx-object'"
check "  runs" runs "$out/app-cxx-object" ok
unset PKG_CONFIG_PATH

echo "== (c) CMake: find_package(mimalloc) with CMAKE_PREFIX_PATH=<prefix>"
for type in Release Debug; do
  debug=0; lib=libmimalloc.so.1
  [ $type = Debug ] && debug=1 && lib=libmimalloc-debug.so.1
  dir="$out/cmake-$type"
  check "configure and build ($type)" cmake_consumer "$dir" $type "$stage"
  check "  app-shared links $lib" needed "$dir/app-shared" $lib
  for app in app-shared app-static app-legacy-name app-object; do
    check "  $app runs" runs "$dir/$app" ok malloc_is_ours=1 debug=$debug
  done
  check "  app-cxx-static runs" runs "$dir/app-cxx-static" ok
done

echo "== the versioned layout (MI_INSTALL_VERSIONED=ON)"
vbuild="$out/versioned-build"
vprefix="$out/versioned"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
check "configure, build, install" bash -c "cmake -S '$root' -B '$vbuild' ${gen[*]:-} -DCMAKE_BUILD_TYPE=Release -DMI_INSTALL_VERSIONED=ON -DMI_BUILD_TESTS=OFF -DMI_BUILD_BENCH=OFF && cmake --build '$vbuild' && cmake --install '$vbuild' --prefix '$vprefix'"
echo "-- find versioned | sort"
(cd "$out" && find versioned | sort)
for f in lib/mimalloc-1.6/libmimalloc.so.1.6 lib/mimalloc-1.6/libmimalloc.a lib/mimalloc-1.6/mimalloc.o \
         lib/mimalloc-1.6/include/mimalloc.h lib/mimalloc-1.6/cmake/mimalloc-config.cmake lib/pkgconfig/mimalloc.pc; do
  check "$f" has_file "$vprefix/$f"
done
check "lib/libmimalloc.so.1 -> mimalloc-1.6/libmimalloc.so.1" \
  bash -c "$(declare -f symlink_is); symlink_is '$vprefix/lib/libmimalloc.so.1' mimalloc-1.6/libmimalloc.so.1 && symlink_is '$vprefix/lib/libmimalloc.so' mimalloc-1.6/libmimalloc.so"
check "pkg-config build, run with LD_LIBRARY_PATH=<prefix>/lib" \
  bash -c "cc '$here/app.c' \$(PKG_CONFIG_PATH='$vprefix/lib/pkgconfig' pkg-config --cflags --libs mimalloc) -o '$out/app-versioned' && $(declare -f runs) && LD_LIBRARY_PATH='$vprefix/lib' runs '$out/app-versioned' ok malloc_is_ours=1"
check "CMake find_package" cmake_consumer "$out/cmake-versioned" Release "$vprefix"
check "  app-shared runs" runs "$out/cmake-versioned/app-shared" ok malloc_is_ours=1 debug=0

echo "== (b) the system prefix"
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && unshare -m --propagation private true 2>/dev/null; then
  mkdir -p "$out/system"
  unshare -m --propagation private bash "$0" --system "$rel" "$out" > "$out/system.txt" 2>&1
  rc=$?
  cat "$out/system.txt"
  if [ $rc -eq 77 ]; then
    echo "  SKIPPED: no tmpfs or overlay mounts in a private mount namespace here"
  else
    sys_passed=$(sed -n 's/^system: \([0-9]*\) passed.*/\1/p' "$out/system.txt")
    sys_failed=$(sed -n 's/^system: [0-9]* passed, \([0-9]*\) failed/\1/p' "$out/system.txt")
    passed=$((passed + ${sys_passed:-0}))
    if [ $rc -ne 0 ]; then failed=$((failed + ${sys_failed:-1})); fi
  fi
else
  echo "  SKIPPED: needs root and a private mount namespace (unshare -m --propagation private); nothing is installed outside $out"
fi

echo "consumer: $passed passed, $failed failed"
[ $failed -eq 0 ]
