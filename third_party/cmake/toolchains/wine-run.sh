#!/bin/sh
# Runs a Windows program under wine for CTest and the test discovery. The
# wine server is kept for a minute after its last client: one that shuts
# down as the next test's program connects fails that program at random
# ("wine client error: recvmsg: Connection reset by peer").
wineserver -p60 >/dev/null 2>&1
exec wine "$@"
