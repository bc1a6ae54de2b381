package main

import (
	"net"
	"os"
	"strconv"

	"github.com/kvselect/kvselect/bus"
)

// replicaAliases lists the ids a client may use for this replica besides replicaID, each as
// tcp://<host>:<port> with the replica-sync port (--replica-sync-port, else --port): the
// hostname, POD_IP (what Dynamo's Kubernetes endpoint picker registers peers by), every
// interface address, and the default id form when --replica-id replaced it. Peers match them
// when they apply events (bus/aliases.go). The list is deduplicated, without replicaID, and
// capped at bus.MaxAliases, the most likely names first (POD_IP, hostname, global addresses,
// then loopback).
func replicaAliases(replicaID, hostname, podIP string, port int, addrs []net.Addr) []string {
	p := strconv.Itoa(port)
	id := func(host string) string { return "tcp://" + net.JoinHostPort(host, p) }
	var out []string
	seen := map[string]bool{replicaID: true}
	add := func(a string) {
		if !seen[a] && len(out) < bus.MaxAliases {
			seen[a] = true
			out = append(out, a)
		}
	}
	if ip := net.ParseIP(podIP); ip != nil {
		add(id(ip.String()))
	}
	if hostname != "" {
		add(id(hostname))
	}
	var loop []string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsUnspecified() || n.IP.IsLinkLocalUnicast() || n.IP.IsMulticast() {
			continue // link-local addresses need a zone no peer would write
		}
		if n.IP.IsLoopback() {
			loop = append(loop, id(n.IP.String()))
			continue
		}
		add(id(n.IP.String()))
	}
	for _, a := range loop {
		add(a)
	}
	return out
}

// localAliases is replicaAliases for this host: its hostname, POD_IP and interface addresses.
func localAliases(replicaID string, port int) []string {
	host, _ := os.Hostname()
	addrs, _ := net.InterfaceAddrs() // none on error: the hostname and POD_IP still apply
	return replicaAliases(replicaID, host, os.Getenv("POD_IP"), port, addrs)
}

// syncPort is the port in this replica's default id and aliases: --replica-sync-port when set,
// else --port.
func (o *options) syncPort() int {
	if o.replicaSyncPort != 0 {
		return o.replicaSyncPort
	}
	return o.port
}
