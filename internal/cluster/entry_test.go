package cluster

import (
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/etcdsrv"
)

func TestDecodeEntry(t *testing.T) {
	pre := ClusterPrefix("c")
	good := `{"v":1,"host":"h1","name":"u0","address":"198.18.1.2","port":1195,"proto":"udp","state":"up","clients":3,"bytes_per_sec":12.5,"updated":"2026-11-23T12:00:00Z"}`
	e, err := DecodeEntry("c", pre+"instances/h1/u0", []byte(good))
	if err != nil || e.Instance == nil || e.Instance.Endpoint().Name != "h1/u0" || e.Instance.Clients != 3 {
		t.Fatalf("good instance entry: %+v %v", e, err)
	}
	host := `{"v":1,"host":"h1","advertise":"vpn1.example.net","cluster_id":"abcd","ttl_seconds":10,"started":"2026-11-23T12:00:00Z","updated":"2026-11-23T12:00:00Z"}`
	if e, err := DecodeEntry("c", pre+"hosts/h1", []byte(host)); err != nil || e.Host == nil {
		t.Fatalf("good host entry: %+v %v", e, err)
	}
	if e, err := DecodeEntry("c", AssignedRoot+"c/h1/u0/0123abcd", nil); err != nil || e.Assigned != "h1/u0" {
		t.Fatalf("assignment record: %+v %v", e, err)
	}
	for _, tc := range []struct{ key, value, why string }{
		{pre + "instances/h1/u0", strings.Replace(good, `"v":1`, `"v":2`, 1), "version"},
		{pre + "instances/h1/u0", strings.Replace(good, `"198.18.1.2"`, `"--up /bin/sh"`, 1), "address"},
		{pre + "instances/h1/u0", strings.Replace(good, `1195`, `0`, 1), "port"},
		{pre + "instances/h1/u0", strings.Replace(good, `1195`, `70000`, 1), "port range"},
		{pre + "instances/h1/u0", strings.Replace(good, `"udp"`, `"sctp"`, 1), "proto"},
		{pre + "instances/h1/u0", strings.Replace(good, `"up"`, `"happy"`, 1), "state"},
		{pre + "instances/h1/u0", strings.Replace(good, `"clients":3`, `"clients":-1`, 1), "clients"},
		{pre + "instances/h1/u0", strings.Replace(good, `"clients":3`, `"clients":3,"extra":1`, 1), "unknown field"},
		{pre + "instances/h1/u0", good + `{}`, "trailing"},
		{pre + "instances/h2/u0", good, "host of key"},
		{pre + "instances/h1/u0/x", good, "key shape"},
		{pre + "instances/h1/..", good, "key segment"},
		{"/other/instances/h1/u0", good, "prefix"},
		{pre + "instances/h1/u0", "\x00\xff", "garbage"},
		{pre + "instances/h1/u0", `{"v":1` + strings.Repeat(" ", MaxEntry) + `}`, "size"},
		{pre + "hosts/h1", strings.Replace(host, `"vpn1.example.net"`, `""`, 1), "advertise"},
	} {
		if _, err := DecodeEntry("c", tc.key, []byte(tc.value)); err == nil {
			t.Errorf("%s: entry %q at %q accepted", tc.why, tc.value, tc.key)
		}
	}
}

// FuzzDecodeEntry: no input panics, and an accepted instance entry is one
// that `cluster connect` can hand to openvpn (Reply.Check passes).
func FuzzDecodeEntry(f *testing.F) {
	pre := ClusterPrefix("c")
	f.Add(pre+"instances/h1/u0", `{"v":1,"host":"h1","name":"u0","address":"198.18.1.2","port":1195,"proto":"udp","state":"up","clients":3,"bytes_per_sec":12.5,"updated":"2026-11-23T12:00:00Z"}`)
	f.Add(pre+"hosts/h1", `{"v":1,"host":"h1","advertise":"198.18.1.2","cluster_id":"abcd","ttl_seconds":10,"started":"2026-11-23T12:00:00Z","updated":"2026-11-23T12:00:00Z"}`)
	f.Add(AssignedRoot+"c/h1/u0/00ff", "")
	f.Add(pre+"instances/h1/u0", `{"v":1,"bytes_per_sec":1e999}`)
	f.Add(pre+"instances//", `null`)
	f.Add(pre, `[]`)
	f.Fuzz(func(t *testing.T, key, value string) {
		e, err := DecodeEntry("c", key, []byte(value))
		if err != nil {
			return
		}
		if e.Instance != nil {
			ep := e.Instance.Endpoint()
			if err := (Reply{Remote: ep.Host, Port: ep.Port, Proto: ep.Proto}).Check(); err != nil {
				t.Fatalf("accepted entry %q gives a reply connect refuses: %v", value, err)
			}
		}
	})
}

// The roles of the lab's etcd (etcdsrv) give hosts and dispatchers write
// access by these prefixes: a changed layout must change them too.
func TestKeyLayoutMatchesEtcdRoles(t *testing.T) {
	t.Parallel()
	if RegistryRoot != etcdsrv.ServePrefix || AssignedRoot != etcdsrv.DispatchPrefix || !strings.HasPrefix(WatchRoot, etcdsrv.KeyPrefix) {
		t.Errorf("registry keys %s, %s, %s; etcd roles %s, %s, %s", RegistryRoot, AssignedRoot, WatchRoot, etcdsrv.ServePrefix, etcdsrv.DispatchPrefix, etcdsrv.KeyPrefix)
	}
}
