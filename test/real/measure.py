#!/usr/bin/python3
"""Run one command and record how it ended, its wall time and its peak RSS.

usage: measure.py META STDOUT STDERR TIMEOUT_S CWD -- CMD [ARG...]

CMD runs in CWD with stdout/stderr sent to the two files, in a session of
its own; after TIMEOUT_S seconds the whole process tree is killed (measure.py
is a child subreaper, so even descendants in sessions of their own are found).
META receives one line "exit=N wall=SECONDS maxrss_kib=K timeout=0|1": N is the exit
code, or 128+signal if the command died of a signal (as a shell reports it),
and maxrss_kib is the kernel's ru_maxrss from wait4(), that is the peak RSS
of the largest single process in the tree (the command or any descendant it
waited for).  measure.py itself exits 0 unless it could not run at all.

This wrapper is not preloaded itself: the caller puts LD_PRELOAD into the
command (env LD_PRELOAD=... cmd) so that only the measured tree gets it.
"""
import os
import signal
import sys
import threading
import time


def become_subreaper():
    """Orphaned descendants (say python -m test's -jN workers, which run in
    sessions of their own) are reparented to us, so a timeout finds them."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def descendants(root):
    """All processes below root (a snapshot of /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, pending = [], [root]
    while pending:
        for c in children.get(pending.pop(), []):
            found.append(c)
            pending.append(c)
    return found


def main():
    if len(sys.argv) < 8 or sys.argv[6] != "--":
        sys.stderr.write(__doc__)
        return 2
    meta, out, err, timeout, cwd = sys.argv[1:6]
    cmd = sys.argv[7:]
    timeout = float(timeout)
    become_subreaper()
    with open(out, "wb") as fo, open(err, "wb") as fe:
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # child
            try:
                os.setsid()
                os.chdir(cwd)
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                os.dup2(fo.fileno(), 1)
                os.dup2(fe.fileno(), 2)
                os.execvp(cmd[0], cmd)
            except BaseException as e:  # noqa: BLE001
                os.write(2, ("measure.py: cannot run %r: %s\n" % (cmd, e)).encode())
            os._exit(127)
        timed_out = []

        def kill():
            timed_out.append(True)
            for victim in [pid] + descendants(pid):
                try:
                    os.kill(victim, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.daemon = True
        timer.start()
        while True:
            try:
                _, status, ru = os.wait4(pid, 0)
                break
            except InterruptedError:
                continue
        wall = time.monotonic() - t0
        timer.cancel()
    if os.WIFSIGNALED(status):
        code = 128 + os.WTERMSIG(status)
    else:
        code = os.WEXITSTATUS(status)
    with open(meta, "w") as fm:
        fm.write("exit=%d wall=%.2f maxrss_kib=%d timeout=%d\n"
                 % (code, wall, ru.ru_maxrss, 1 if timed_out else 0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
