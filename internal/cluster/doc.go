// Package cluster runs one OpenVPN 2.x server per CPU behind one address:
// the multi-instance layout of OpenVPN Access Server and of the published
// multi-instance write-up, supervised and measured.
//
//	base config ──Plan──▶ N instance configs (own port, tun, subnet of the
//	                      pool, status file, management unix socket)
//	Serve ──▶ supervisor per instance: start pinned + reniced, "up" after
//	          "Initialization Sequence Completed" and management `state`
//	          CONNECTED, restart with exponential backoff, crash loop reported
//	      ──▶ one-port mode: iptables HMARK (hash of source address and
//	          port) + REDIRECT to the instance's port, sticky by conntrack
//	      ──▶ dispatcher: TLS with the cluster's CA, client certificate
//	          required, round-robin or least-loaded over a Registry
//	      ──▶ --irq: NIC interrupt affinity and RPS/XPS plan (irq.go)
//	      ──▶ control socket (status, stop), Prometheus metrics
//
// Every resource (directory, process, iptables chain, sysctl, IRQ/RPS value) is recorded
// in the cluster's state file before it is made, so that Clean removes what
// a killed `cluster serve` left, and nothing else.
//
// Where clusters and connect runs keep their state is a value, Paths, and
// whatever finds a run by its id (directory, state, control socket,
// status, stop, clean-up) is a method of it, with no package function
// beside: the commands act on the host's runs through the zero value,
// Paths{}, and tests through directories of their own.
package cluster
