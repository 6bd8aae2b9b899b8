# k3strap path probe (Python 3.6+, standard library only): the protocol of probe.pl, for hosts
# without Perl (RHEL-family minimal images carry python3 for dnf). See probe.pl for the
# protocol; the two print the same lines.
import errno
import os
import select
import signal
import socket
import sys
import time

signal.alarm(int(os.environ.get("K3SP_LIMIT", "20")))
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
out = sys.stdout


def emit(line):
    out.write(line + "\n")
    out.flush()


def errname(e):
    return errno.errorcode.get(e, "errno%d" % e)


nonce, hostid = "", ""
want, probes, sends = [], [], []
lsock, conn = {}, {}
running = False
# sent says the "sent" mark (see probe.pl) was made for the probes of the last go.
sent = False
# The largest datagram printed so far, by probe id (got lines are printed once per size).
gotmax = {}
# rundir is $K3SP_DIR once detached ("" before); wake is the read end of the pipe a signal
# writes to (signal.set_wakeup_fd), so that SIGUSR1 ends the wait in select (Python itself
# resumes a select a signal interrupted: PEP 475).
rundir = ""
wake = -1


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


# The receive buffer of a datagram listener (bytes).
RCVBUF = 4 << 20


def listen_one(proto, host, port):
    typ = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    anyaddr = "::" if ":" in host else "0.0.0.0"
    for h in ([anyaddr] if host == anyaddr else [host, anyaddr]):
        s = socket.socket(family(h), typ)
        if proto == "tcp":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        else:
            # A node's datagram listener gets every other node's datagrams at once (a server,
            # from hundreds of agents): a large receive buffer keeps the kernel from dropping
            # the burst. SO_RCVBUFFORCE (33) lets root exceed net.core.rmem_max.
            try:
                s.setsockopt(socket.SOL_SOCKET, 33, RCVBUF)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        try:
            s.bind((h, int(port)))
            if proto == "tcp":
                s.listen(128)
        except OSError as e:
            s.close()
            if e.errno == errno.EADDRNOTAVAIL and h != anyaddr:
                continue
            return ("busy " if e.errno == errno.EADDRINUSE else "error ") + errname(e.errno)
        s.setblocking(False)
        lsock[s.fileno()] = (s, proto, port)
        return "ok" if h == host else "any"
    return "error EADDRNOTAVAIL"


def payload(pid, seq, size):
    p = ("K3SP %s %s %d\n" % (nonce, pid, seq)).encode()
    return p + b"x" * max(0, size - len(p))


# At most this many connects are open at once; the rest wait in tcpq.
MAXCONN = 200
tcpq = []
# Connects refused by a local rule (EPERM: a packet filter dropped the SYN on its way out) are
# tried again 0.1 s later while their time lasts: a rule that drops now and then (a rate limit)
# is not a closed path; one that always drops still fails. (probe, first try, next try)
tcpwait = []


def tcp_refused(p, t0, e):
    if e == errno.EPERM and time.monotonic() + 0.1 < t0 + int(p[4]) / 1000.0:
        tcpwait.append((p, t0, time.monotonic() + 0.1))
        return
    emit("tcp %s fail %d %s" % (p[1], int((time.monotonic() - t0) * 1000), errname(e)))


def open_tcp():
    while tcpq and len(conn) < MAXCONN:
        item = tcpq.pop(0)
        p, t0 = item if isinstance(item, tuple) else (item, None)
        pid, host, port, ms = p[1], p[2], int(p[3]), int(p[4])
        t = time.monotonic() if t0 is None else t0
        s = socket.socket(family(host), socket.SOCK_STREAM)
        s.setblocking(False)
        e = s.connect_ex((host, port))
        if e not in (0, errno.EINPROGRESS):
            s.close()
            tcp_refused(p, t, e)
            continue
        conn[s.fileno()] = {"s": s, "id": pid, "t0": t, "until": t + ms / 1000.0, "state": "connect", "buf": b"", "p": p}


def start_probes():
    global probes, running, sent
    t = time.monotonic()
    for p in probes:
        kind, pid, host = p[0], p[1], p[2]
        if kind == "tcp":
            tcpq.append(p)
        else:
            # udp/mtu ID SRC ADDR PORT ...: the fields after the id are shifted by SRC
            src, host, port, a = host, p[3], int(p[4]), p[5:]
            n, size = (int(a[0]), int(a[1])) if kind == "udp" else (int(a[1]), int(a[0]))
            s = socket.socket(family(host), socket.SOCK_DGRAM)
            if src != "-" and family(src) == family(host):
                try:
                    s.bind((src, 0))
                except OSError:
                    pass
            if kind == "mtu":
                if family(host) == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, 23, 2)
                else:
                    s.setsockopt(socket.IPPROTO_IP, 10, 2)
            try:
                s.connect((host, port))
            except OSError as e:
                emit("%s %s fail %s" % (kind, pid, errname(e.errno)))
                s.close()
                continue
            sends.append({"s": s, "kind": kind, "id": pid, "n": n, "size": size, "seq": 0, "at": t})
    probes = []
    running = True
    sent = False
    open_tcp()


def pump_sends():
    global sends
    t = time.monotonic()
    for x in sends:
        if x.get("done"):
            continue
        while x["seq"] < x["n"] and x["at"] <= t:
            try:
                x["s"].send(payload(x["id"], x["seq"], x["size"]))
                x["ok"] = x.get("ok", 0) + 1
            except OSError as e:
                if x["kind"] == "mtu" and e.errno == errno.EMSGSIZE:
                    v6 = x["s"].family == socket.AF_INET6
                    try:
                        pmtu = x["s"].getsockopt(socket.IPPROTO_IPV6, 24) if v6 else x["s"].getsockopt(socket.IPPROTO_IP, 14)
                    except OSError:
                        pmtu = 0
                    emit("mtu %s emsgsize %d %d" % (x["id"], x["size"], pmtu))
                    x["done"] = True
                    break
                # A copy a local rule refused (EPERM, ...): the next copies still go; the probe
                # fails only when none could be sent.
                x["err"] = e.errno
            x["seq"] += 1
            x["at"] += 0.1
        if not x.get("done") and x["seq"] >= x["n"]:
            if not x.get("ok"):
                emit("%s %s fail %s" % (x["kind"], x["id"], errname(x["err"])))
            else:
                emit("mtu %s sent %d" % (x["id"], x["size"]) if x["kind"] == "mtu" else "udp %s sent %d" % (x["id"], x["ok"]))
            x["done"] = True
    for x in sends:
        if x.get("done"):
            x["s"].close()
    sends = [x for x in sends if not x.get("done")]


def finish_conn(fd, line):
    c = conn.pop(fd)
    ms = int((time.monotonic() - c["t0"]) * 1000)
    emit("tcp %s %s" % (c["id"], line.replace("MS", str(ms))))
    c["s"].close()


def command(line):
    global nonce, hostid, want
    f = line.split()
    if not f:
        return
    if f[0] == "id":
        nonce, hostid = f[1], f[2]
    elif f[0] == "listen":
        want.append(f[1:4])
    elif f[0] == "bind":
        for w in want:
            emit("listen %s %s %s" % (w[0], w[2], listen_one(*w)))
        want = []
        emit("ready")
    elif f[0] in ("tcp", "udp", "mtu"):
        probes.append(f)
    elif f[0] == "go":
        start_probes()
    elif f[0] == "detach":
        detach()


def mark(name):
    try:
        open(os.path.join(rundir, name), "w").close()
    except OSError:
        pass


def idle():
    mark("idle")


def cleanup(*_):
    # The listeners first, then the run directory: once it is gone the ports are free
    # (probe-stop.sh waits for that).
    for s, _, _ in lsock.values():
        s.close()
    try:
        for n in os.listdir(rundir):
            if n in ("out", "idle", "sent", "pid", ".cmd") or n.startswith("cmd."):
                os.unlink(os.path.join(rundir, n))
        os.rmdir(rundir)
    except OSError:
        pass
    os._exit(0)


def detach():
    # Leave the SSH session (see probe.pl): the parent prints the child's pid and exits.
    global rundir, out, wake
    d = os.environ.get("K3SP_DIR", "")
    if not d or not os.path.isdir(d):
        emit("error no-dir: K3SP_DIR is not a directory")
        return
    # The output file exists before the fork: probe.sh removes the run directory after this
    # process ends only while it is empty.
    try:
        os.close(os.open(os.path.join(d, "out"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
    except OSError as e:
        emit("error no-dir: " + errname(e.errno))
        return
    try:
        pid = os.fork()
    except OSError as e:
        emit("error fork: " + errname(e.errno))
        return
    if pid:
        emit("detached %d" % pid)
        os._exit(0)
    os.setsid()
    rundir = d
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    fd = os.open(os.path.join(d, "out"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    out = os.fdopen(1, "w")
    with open(os.path.join(d, "pid"), "w") as f:
        f.write("%d\n" % os.getpid())
    idle()
    signal.signal(signal.SIGALRM, cleanup)
    signal.signal(signal.SIGTERM, cleanup)
    wake, w = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w)
    signal.signal(signal.SIGUSR1, lambda *_: None)
    signal.alarm(int(os.environ.get("K3SP_LIMIT", "20")))


def read_cmds():
    # The lines of every command file (cmd.*, in name order), each removed once read; the
    # program ends when the run directory is gone (stopped).
    try:
        names = sorted(n for n in os.listdir(rundir) if n.startswith("cmd."))
    except OSError:
        os._exit(0)
    for n in names:
        try:
            with open(os.path.join(rundir, n)) as f:
                text = f.read()
            os.unlink(os.path.join(rundir, n))
        except OSError:
            continue
        for line in text.split("\n"):
            command(line)


def main():
    global running, sent
    inbuf = b""
    stdin = sys.stdin.fileno()
    os.set_blocking(stdin, False)
    while True:
        rin = ([wake] if rundir else [stdin]) + list(lsock) + [fd for fd, c in conn.items() if c["state"] == "greet"]
        win = [fd for fd, c in conn.items() if c["state"] == "connect"]
        rout, wout, _ = select.select(rin, win, [], 0.05)
        if wake >= 0 and wake in rout:
            try:
                os.read(wake, 512)
            except OSError:
                pass
        if not rundir and stdin in rout:
            try:
                chunk = os.read(stdin, 65536)
            except BlockingIOError:
                chunk = None
            if chunk == b"":
                return
            if chunk:
                inbuf += chunk
                while b"\n" in inbuf:
                    line, inbuf = inbuf.split(b"\n", 1)
                    command(line.decode(errors="replace"))
        for fd in [f for f in rout if f in lsock]:
            s, proto, port = lsock[fd]
            while True:
                try:
                    if proto == "tcp":
                        c, _ = s.accept()
                        try:
                            c.send(("K3SP %s %s\n" % (nonce, hostid)).encode())
                        except OSError:
                            pass
                        c.close()
                    else:
                        d, src = s.recvfrom(65536)
                        f = d.split(b"\n", 1)[0].split()
                        if len(f) >= 4 and f[0] == b"K3SP" and f[1].decode() == nonce:
                            gid = f[2].decode()
                            if gotmax.get(gid, -1) >= len(d):
                                continue
                            gotmax[gid] = len(d)
                            emit("got %s %s %s %s %d" % (port, src[0], f[2].decode(), f[3].decode(), len(d)))
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break
        for fd in list(conn):
            c = conn.get(fd)
            if c is None:
                continue
            if c["state"] == "connect" and fd in wout:
                e = c["s"].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if e == errno.EPERM:
                    conn.pop(fd)
                    c["s"].close()
                    tcp_refused(c["p"], c["t0"], e)
                    continue
                if e:
                    finish_conn(fd, "fail MS " + errname(e))
                    continue
                c["state"], c["until"] = "greet", time.monotonic() + 1.5
            elif c["state"] == "greet" and fd in rout:
                try:
                    chunk = c["s"].recv(256)
                except OSError:
                    chunk = b""
                c["buf"] += chunk
                if not chunk or b"\n" in c["buf"]:
                    f = c["buf"].split()
                    if len(f) >= 3 and f[0] == b"K3SP" and f[1].decode() == nonce:
                        finish_conn(fd, "ok MS " + f[2].decode())
                    else:
                        finish_conn(fd, "other MS")
        t = time.monotonic()
        for fd in list(conn):
            c = conn[fd]
            if t > c["until"]:
                finish_conn(fd, "timeout MS" if c["state"] == "connect" else "other MS")
        if tcpwait:
            due = [w for w in tcpwait if w[2] <= t]
            tcpwait[:] = [w for w in tcpwait if w[2] > t]
            tcpq.extend((p, t0) for p, t0, _ in due)
        if tcpq:
            open_tcp()
        if sends:
            pump_sends()
        if rundir and running and not sent and not conn and not tcpq and not tcpwait and all(x["seq"] or x.get("done") for x in sends):
            mark("sent")
            sent = True
        if running and not conn and not sends and not tcpq and not tcpwait:
            emit("probed")
            running = False
            if rundir:
                idle()
        if rundir:
            read_cmds()


main()
