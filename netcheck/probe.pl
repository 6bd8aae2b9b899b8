# k3strap path probe (Perl 5.14+, core modules of perl-base only). The same protocol as
# probe.py; probe.sh picks one. It listens on the ports K3s will need on this host and, when
# told, connects to / sends datagrams to the other hosts' ports, printing what happens.
#
# stdin (lines):  id NONCE HOSTID         this run's nonce and this host's id
#                 listen tcp|udp ADDR PORT a test listener on ADDR (or any address if ADDR is not local)
#                 bind                    bind every listener, print their state, then "ready"
#                 tcp ID ADDR PORT MS     connect within MS ms, read the greeting
#                 udp ID SRC ADDR PORT N SIZE  send N datagrams of SIZE bytes, 100 ms apart, from
#                                         SRC (- for the address routing picks)
#                 mtu ID SRC ADDR PORT SIZE N  the same with don't-fragment
#                 go                      run the probes given since the last go; "probed" when done
#                 detach                  go on without the SSH session: print "detached PID" and
#                                         leave it; from then on the lines come from files
#                                         $K3SP_DIR/cmd.* (read, then removed), what is printed is
#                                         appended to $K3SP_DIR/out, $K3SP_DIR/idle exists while
#                                         no probes run and $K3SP_DIR/sent once every connect
#                                         ended and every datagram probe sent its first copy
#                                         (what the answers need), SIGUSR1 makes it look for command files
#                                         at once, and the program ends when $K3SP_DIR is
#                                         removed (probe-stop.sh) or at its time limit, removing it
#                 (end of input)          close everything and exit (before detach)
# stdout:         listen PROTO PORT ok|any|busy|error [ERRNO]
#                 ready
#                 tcp ID ok|other|fail|timeout MS [HOSTID|ERRNO]
#                 udp ID sent N | udp ID fail ERRNO
#                 mtu ID sent SIZE | mtu ID emsgsize SIZE PMTU | mtu ID fail ERRNO
#                 got PORT SRCADDR ID SEQ BYTES   a datagram of this run arrived (the first of
#                                         each probe, then only larger ones)
#                 probed
#                 detached PID
# It exits at the end of input or, at the latest, after $ENV{K3SP_LIMIT} seconds (alarm).
use strict;
use warnings;
use Socket qw(:addrinfo AF_INET AF_INET6 SOCK_STREAM SOCK_DGRAM SOL_SOCKET SO_REUSEADDR SO_ERROR
  IPPROTO_IP IPPROTO_IPV6 IPPROTO_TCP IPPROTO_UDP inet_ntop unpack_sockaddr_in unpack_sockaddr_in6 sockaddr_family);
use POSIX ();
use Errno ();
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);

$| = 1;
my $limit = $ENV{K3SP_LIMIT} || 20;
alarm($limit);
$SIG{PIPE} = 'IGNORE';
my $tck = POSIX::sysconf(&POSIX::_SC_CLK_TCK) || 100;
sub now { return (POSIX::times())[0] / $tck; }

my ($nonce, $hostid) = ('', '');
my (@want, %lsock, @probes, %conn, @sends);
my $inbuf = '';
my $running = 0;
# $sent says the "sent" mark was made for the probes of the last go.
my $sent = 0;
# The largest datagram printed so far, by probe id (got lines are printed once per size).
my %gotmax;
# $dir is $K3SP_DIR once detached ('' before).
my $dir = '';
my $stdin_open = 1;

sub errname {
	my $e = shift;
	for my $n (qw(ECONNREFUSED EHOSTUNREACH ENETUNREACH ETIMEDOUT EADDRINUSE EADDRNOTAVAIL EACCES EPERM EMSGSIZE ECONNRESET)) {
		my $v = eval "Errno::$n()";
		return $n if defined $v && $e == $v;
	}
	return "errno" . $e;
}

sub nonblock { my $fh = shift; my $f = fcntl($fh, F_GETFL, 0); fcntl($fh, F_SETFL, $f | O_NONBLOCK); }

sub addr {
	my ($host, $port, $type) = @_;
	my ($err, @res) = getaddrinfo($host, $port, { flags => AI_NUMERICHOST | AI_NUMERICSERV, socktype => $type });
	return if $err || !@res;
	return $res[0];
}

# The receive buffer of a datagram listener (bytes).
my $rcvbuf = 4 << 20;

# listen_one binds HOST:PORT, or the wildcard address of HOST's family when HOST is not an
# address of this host.
sub listen_one {
	my ($proto, $host, $port) = @_;
	my $type = $proto eq 'tcp' ? SOCK_STREAM : SOCK_DGRAM;
	my $any = $host =~ /:/ ? '::' : '0.0.0.0';
	for my $h ($host eq $any ? ($any) : ($host, $any)) {
		my $ai = addr($h, $port, $type) or next;
		my $s;
		socket($s, $ai->{family}, $type, 0) or return "error " . errname($! + 0);
		setsockopt($s, SOL_SOCKET, SO_REUSEADDR, 1) if $proto eq 'tcp';
		# A node's datagram listener gets every other node's datagrams at once (a server, from
		# hundreds of agents): a large receive buffer keeps the kernel from dropping the burst.
		# SO_RCVBUFFORCE (33) lets root exceed net.core.rmem_max; SO_RCVBUF (8) is the fallback.
		setsockopt($s, SOL_SOCKET, 33, $rcvbuf) or setsockopt($s, SOL_SOCKET, 8, $rcvbuf) if $proto eq 'udp';
		if (!bind($s, $ai->{addr})) {
			my $e = $! + 0;
			close $s;
			next if $e == Errno::EADDRNOTAVAIL() && $h ne $any;
			return ($e == Errno::EADDRINUSE() ? 'busy ' : 'error ') . errname($e);
		}
		if ($proto eq 'tcp' && !listen($s, 128)) { my $e = $! + 0; close $s; return 'error ' . errname($e); }
		nonblock($s);
		$lsock{fileno($s)} = { s => $s, proto => $proto, port => $port };
		return $h eq $host ? 'ok' : 'any';
	}
	return 'error EADDRNOTAVAIL';
}

sub payload {
	my ($id, $seq, $size) = @_;
	my $p = "K3SP $nonce $id $seq\n";
	$p .= 'x' x ($size - length $p) if $size > length $p;
	return $p;
}

# At most this many connects are open at once (file descriptors, select's bit vectors); the
# rest wait in @tcpq.
my $maxconn = 200;
my @tcpq;
# Connects refused by a local rule (EPERM: a packet filter dropped the SYN on its way out)
# are tried again 0.1 s later while their time lasts: a rule that drops now and then (a rate
# limit) is not a closed path; one that always drops still fails. Entries as in @tcpq plus the
# first try's time and when to try again.
my @tcpwait;

sub tcp_refused {
	my ($p, $t0, $e) = @_;
	my ($kind, $id, $host, $port, $ms) = @$p;
	if ($e == Errno::EPERM() && now() + 0.1 < $t0 + $ms / 1000) {
		push @tcpwait, [ $kind, $id, $host, $port, $ms, $t0, now() + 0.1 ];
		return;
	}
	print "tcp $id fail " . int((now() - $t0) * 1000) . " " . errname($e) . "\n";
}

sub open_tcp {
	while (@tcpq && keys(%conn) < $maxconn) {
		my $p = shift @tcpq;
		my ($kind, $id, $host, $port, $ms, $t0) = @$p;
		$t0 //= now();
		my $ai = addr($host, $port, SOCK_STREAM);
		if (!$ai) { print "tcp $id fail 0 EADDR\n"; next; }
		my $s;
		socket($s, $ai->{family}, SOCK_STREAM, 0) or do { print "tcp $id fail 0 " . errname($! + 0) . "\n"; next };
		nonblock($s);
		if (!connect($s, $ai->{addr}) && $! != Errno::EINPROGRESS()) {
			my $e = $! + 0;
			close $s;
			tcp_refused($p, $t0, $e);
			next;
		}
		$conn{fileno($s)} = { s => $s, id => $id, t0 => $t0, until => $t0 + $ms / 1000, state => 'connect', buf => '', p => $p };
	}
}

sub start_probes {
	my $t = now();
	for my $p (@probes) {
		my ($kind, $id, $host, $port, @a) = @$p;
		if ($kind eq 'tcp') {
			push @tcpq, $p;
		} else {
			# udp/mtu ID SRC ADDR PORT ...: the fields after the id are shifted by SRC
			my $src = $host;
			($host, $port, @a) = ($port, @a);
			my ($n, $size) = $kind eq 'udp' ? @a : ($a[1], $a[0]);
			my $ai = addr($host, $port, SOCK_DGRAM);
			if (!$ai) { print "$kind $id fail EADDR\n"; next; }
			my $s;
			socket($s, $ai->{family}, SOCK_DGRAM, 0) or do { print "$kind $id fail " . errname($! + 0) . "\n"; next };
			if ($kind eq 'mtu') {
				# IP_MTU_DISCOVER / IPV6_MTU_DISCOVER = IP_PMTUDISC_DO (Linux: 10 / 23, 2)
				if ($ai->{family} == AF_INET6) { setsockopt($s, IPPROTO_IPV6, 23, 2); } else { setsockopt($s, IPPROTO_IP, 10, 2); }
			}
			if ($src ne '-') {
				my $sa = addr($src, 0, SOCK_DGRAM);
				bind($s, $sa->{addr}) if $sa && $sa->{family} == $ai->{family};
			}
			connect($s, $ai->{addr}) or do { print "$kind $id fail " . errname($! + 0) . "\n"; close $s; next };
			push @sends, { s => $s, kind => $kind, id => $id, n => $n, size => $size, seq => 0, at => $t, fam => $ai->{family} };
		}
	}
	@probes = ();
	$running = 1;
	$sent = 0;
	open_tcp();
}

sub pump_sends {
	my $t = now();
	for my $x (@sends) {
		next if $x->{done};
		while ($x->{seq} < $x->{n} && $x->{at} <= $t) {
			if (!defined send($x->{s}, payload($x->{id}, $x->{seq}, $x->{size}), 0)) {
				my $e = $! + 0;
				if ($x->{kind} eq 'mtu' && $e == Errno::EMSGSIZE()) {
					my $opt = $x->{fam} == AF_INET6 ? getsockopt($x->{s}, IPPROTO_IPV6, 24) : getsockopt($x->{s}, IPPROTO_IP, 14);
					my $pmtu = defined $opt ? unpack('i', $opt) : 0;
					print "mtu $x->{id} emsgsize $x->{size} $pmtu\n";
					$x->{done} = 1;
					last;
				}
				# A copy a local rule refused (EPERM, ...): the next copies still go; the probe
				# fails only when none could be sent.
				$x->{err} = $e;
			} else {
				$x->{ok}++;
			}
			$x->{seq}++;
			$x->{at} += 0.1;
		}
		if (!$x->{done} && $x->{seq} >= $x->{n}) {
			if (!$x->{ok}) { print "$x->{kind} $x->{id} fail " . errname($x->{err}) . "\n"; }
			else { print $x->{kind} eq 'mtu' ? "mtu $x->{id} sent $x->{size}\n" : "udp $x->{id} sent $x->{ok}\n"; }
			$x->{done} = 1;
		}
	}
	@sends = grep { !$_->{done} || $_->{keep} } @sends;
}

sub finish_conn {
	my ($fd, $line) = @_;
	my $c = delete $conn{$fd};
	my $ms = int((now() - $c->{t0}) * 1000);
	$line =~ s/MS/$ms/;
	print "tcp $c->{id} $line\n";
	close $c->{s};
}

sub command {
	my $l = shift;
	my @f = split ' ', $l;
	return unless @f;
	if ($f[0] eq 'id') { ($nonce, $hostid) = @f[1, 2]; }
	elsif ($f[0] eq 'listen') { push @want, [ @f[1, 2, 3] ]; }
	elsif ($f[0] eq 'bind') { print "listen $_->[0] $_->[2] " . listen_one(@$_) . "\n" for @want; @want = (); print "ready\n"; }
	elsif ($f[0] eq 'tcp' || $f[0] eq 'udp' || $f[0] eq 'mtu') { push @probes, [@f]; }
	elsif ($f[0] eq 'go') { start_probes(); }
	elsif ($f[0] eq 'detach') { detach(); }
}

sub mark { my $m = shift; if (open(my $fh, ">", "$dir/$m")) { close $fh; } }
sub idle { mark('idle'); }

# cleanup closes the listeners, then removes the run directory: once it is gone the ports are
# free (probe-stop.sh waits for that).
sub cleanup {
	close $_->{s} for values %lsock;
	unlink "$dir/$_" for qw(out idle sent pid .cmd);
	if (opendir(my $dh, $dir)) { unlink map { "$dir/$_" } grep { /^cmd\./ } readdir $dh; closedir $dh; }
	rmdir $dir;
}

# detach leaves the SSH session: the parent prints the child's pid and exits; the child goes
# on in a session of its own, its input the command files and its output $K3SP_DIR/out.
sub detach {
	my $d = $ENV{K3SP_DIR} // '';
	if ($d eq '' || !-d $d) { print "error no-dir: K3SP_DIR is not a directory\n"; return; }
	# The output file exists before the fork: probe.sh removes the run directory after this
	# process ends only while it is empty.
	if (!open(my $fh, '>>', "$d/out")) { print "error no-dir: " . errname($! + 0) . "\n"; return; } else { close $fh; }
	my $pid = fork;
	if (!defined $pid) { print "error fork: " . errname($! + 0) . "\n"; return; }
	if ($pid) { print "detached $pid\n"; POSIX::_exit(0); }
	POSIX::setsid();
	$dir = $d;
	open(STDIN, '<', '/dev/null');
	open(STDOUT, '>>', "$dir/out") or POSIX::_exit(3);
	open(STDERR, '>&', \*STDOUT);
	$| = 1;
	$stdin_open = 0;
	if (open(my $fh, '>', "$dir/pid")) { print $fh "$$\n"; close $fh; }
	idle();
	$SIG{ALRM} = $SIG{TERM} = sub { cleanup(); POSIX::_exit(0); };
	# A signal ends the wait in select (EINTR), and the loop reads the command files next.
	$SIG{USR1} = sub { };
	alarm($limit);
}

# read_cmds runs the lines of every command file (cmd.*, in name order) and removes it; it
# ends the program when $dir is gone (stopped).
sub read_cmds {
	opendir(my $dh, $dir) or POSIX::_exit(0);
	my @c = sort grep { /^cmd\./ } readdir $dh;
	closedir $dh;
	for my $c (@c) {
		open(my $fh, '<', "$dir/$c") or next;
		my $t = do { local $/; <$fh> };
		close $fh;
		unlink "$dir/$c";
		command($_) for split /\n/, $t // '';
	}
}

nonblock(\*STDIN);
while (1) {
	my ($rin, $win) = ('', '');
	vec($rin, fileno(STDIN), 1) = 1 if $stdin_open;
	vec($rin, $_, 1) = 1 for keys %lsock;
	for my $fd (keys %conn) {
		if ($conn{$fd}{state} eq 'connect') { vec($win, $fd, 1) = 1; } else { vec($rin, $fd, 1) = 1; }
	}
	my $wait = 0.05;
	my ($n) = select(my $rout = $rin, my $wout = $win, undef, $wait);
	if ($n > 0) {
		if ($stdin_open && vec($rout, fileno(STDIN), 1)) {
			my $got = sysread(STDIN, my $chunk, 65536);
			if (!$got) { last if defined $got || $! != Errno::EAGAIN(); }
			else {
				$inbuf .= $chunk;
				while ($inbuf =~ s/^([^\n]*)\n//) { command($1); }
			}
		}
		for my $fd (keys %lsock) {
			next unless vec($rout, $fd, 1);
			my $l = $lsock{$fd};
			if ($l->{proto} eq 'tcp') {
				while (accept(my $c, $l->{s})) { syswrite($c, "K3SP $nonce $hostid\n"); close $c; }
			} else {
				while (defined(my $from = recv($l->{s}, my $d, 65536, 0))) {
					last if $from eq '' && $d eq '';
					next unless $d =~ /^K3SP \Q$nonce\E (\S+) (\d+)/;
					my ($id, $seq) = ($1, $2);
					next if ($gotmax{$id} // -1) >= length($d);
					$gotmax{$id} = length($d);
					my $fam = sockaddr_family($from);
					my $a = $fam == AF_INET6 ? inet_ntop(AF_INET6, (unpack_sockaddr_in6($from))[1]) : inet_ntop(AF_INET, (unpack_sockaddr_in($from))[1]);
					print "got $l->{port} $a $id $seq " . length($d) . "\n";
				}
			}
		}
		for my $fd (keys %conn) {
			my $c = $conn{$fd} or next;
			if ($c->{state} eq 'connect' && vec($wout, $fd, 1)) {
				my $e = unpack('i', getsockopt($c->{s}, SOL_SOCKET, SO_ERROR) // pack('i', 0));
				if ($e == Errno::EPERM()) { delete $conn{$fd}; close $c->{s}; tcp_refused($c->{p}, $c->{t0}, $e); next; }
				if ($e) { finish_conn($fd, "fail MS " . errname($e)); next; }
				$c->{state} = 'greet';
				$c->{until} = now() + 1.5;
			} elsif ($c->{state} eq 'greet' && vec($rout, $fd, 1)) {
				my $got = sysread($c->{s}, my $chunk, 256);
				if ($got) { $c->{buf} .= $chunk; }
				if (!$got || $c->{buf} =~ /\n/) {
					if ($c->{buf} =~ /^K3SP \Q$nonce\E (\S+)/) { finish_conn($fd, "ok MS $1"); }
					else { finish_conn($fd, "other MS"); }
				}
			}
		}
	}
	my $t = now();
	for my $fd (keys %conn) {
		my $c = $conn{$fd};
		next unless $t > $c->{until};
		finish_conn($fd, $c->{state} eq 'connect' ? "timeout MS" : "other MS");
	}
	if (@tcpwait) {
		push @tcpq, grep { $_->[6] <= $t } @tcpwait;
		@tcpwait = grep { $_->[6] > $t } @tcpwait;
	}
	open_tcp() if @tcpq;
	pump_sends() if @sends;
	if ($dir ne '' && $running && !$sent && !%conn && !@tcpq && !@tcpwait && !grep { !$_->{seq} && !$_->{done} } @sends) { mark('sent'); $sent = 1; }
	if ($running && !%conn && !@sends && !@tcpq && !@tcpwait) { print "probed\n"; $running = 0; idle() if $dir ne ''; }
	read_cmds() if $dir ne '';
	last if !$stdin_open && $dir eq '';
}
exit 0;
