#!/bin/sh
# wine-run.sh PROGRAM [ARGS...] -- run a Windows x86-64 program under wine64
# (Debian's wine64 package). CMake's CMAKE_CROSSCOMPILING_EMULATOR for the
# Windows build (cmake/mingw-w64-x86_64.cmake): ctest runs every test of that
# build through it. The exit code is the program's.
#
# The wine prefix (WINEPREFIX, by default ~/.wine-mimalloc) is created on
# first use; wine's own messages are off (WINEDEBUG=-all) unless WINEDEBUG is
# set. One wine server outlives each program (60 s after the last one), so a
# program starts in 0.1 s instead of 3 s. When this script starts that
# server, it also starts the session's service processes (wineboot), with
# no standard streams: those processes live as long as the server, and had
# they inherited a test's output pipe, whoever reads it (ctest, or CMake's
# test discovery) would wait for them. Both happen under a lock, as tests run
# in parallel.
set -e
: "${WINEPREFIX:=${HOME:-/root}/.wine-mimalloc}"
: "${WINEDEBUG:=-all}"
export WINEPREFIX WINEDEBUG
wine=$(command -v wine64 || true)
[ -n "$wine" ] || wine=/usr/lib/wine/wine64
if [ ! -x "$wine" ]; then
  echo "wine-run.sh: no wine64 (apt-get install wine64)" >&2
  exit 127
fi
server=$(command -v wineserver || true)
[ -n "$server" ] || server=/usr/lib/wine/wineserver64
mkdir -p "$(dirname "$WINEPREFIX")"
(
  flock 9
  if [ ! -f "$WINEPREFIX/.mimalloc-ready" ]; then
    "$wine" wineboot.exe -i </dev/null >/dev/null 2>&1 9>&- || true
    "$server" -w 9>&- || true
    touch "$WINEPREFIX/.mimalloc-ready"
  fi
  # (status 0: it started a server; 2: one runs already)
  if "$server" -p60 </dev/null >/dev/null 2>&1 9>&-; then
    "$wine" wineboot.exe </dev/null >/dev/null 2>&1 9>&- || true
  fi
) 9>"$WINEPREFIX.lock"
exec "$wine" "$@"
