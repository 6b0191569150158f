#!/bin/sh
# Runs a Windows program under wine for CTest and the test discovery.
#
# When no wine server runs for the prefix, this starts one that stays for a
# minute after its last program (one that shuts down as the next test's
# program connects fails that program: "wine client error: recvmsg:
# Connection reset by peer"), and starts wine's own background processes
# with a trivial program whose output goes nowhere. Started by the test's
# program instead, they would hold its output pipe open for the server's
# lifetime, and CTest would wait for it: the test "hangs" after its program
# exited.
prefix=${WINEPREFIX:-$HOME/.wine}
if [ ! -f "$prefix/system.reg" ]; then
    wineboot --init </dev/null >/dev/null 2>&1
    wineserver -w
fi
if wineserver -p60 </dev/null >/dev/null 2>&1; then
    wine cmd /c exit 0 </dev/null >/dev/null 2>&1
fi
exec wine "$@"
