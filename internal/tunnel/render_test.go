package tunnel

import (
	"strings"
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/dco"
	"github.com/ovpnperf/ovpnperf/internal/openvpn"
)

// TestRenderConfigsDCO: the dco variant's configs are the lab's with
// disable-dco left out, and have no option that turns DCO off (the rules
// lint uses), for 2.6 and 2.7; every other variant keeps disable-dco.
func TestRenderConfigsDCO(t *testing.T) {
	t.Parallel()
	v, err := openvpn.ParseVariant("dco")
	if err != nil || !v.DCO() {
		t.Fatalf("dco variant: %+v %v", v, err)
	}
	srv, cli, err := RenderConfigs(Options{Variant: v, Slot: 2}, "/etc/openvpn")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"server": srv, "client": cli} {
		if strings.Contains(text, "disable-dco") || strings.Contains(text, "\ndco") {
			t.Errorf("%s config of the dco variant:\n%s", name, text)
		}
		cf, err := openvpn.ParseConfigText(name+".conf", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{dco.V26, dco.V27} {
			if bs := dco.Check(cf, target); len(bs) != 0 {
				t.Errorf("%s config turns DCO off in %s: %+v", name, target, bs)
			}
		}
	}
	if !strings.Contains(srv, "topology subnet\n") || !strings.Contains(srv, "port 1196\n") {
		t.Errorf("server config:\n%s", srv)
	}
	def, _ := openvpn.ParseVariant("default")
	mixed, _ := openvpn.ParseVariant("dcobig=dco;sndbuf 1048576")
	for _, c := range []struct {
		v       openvpn.Variant
		disable bool
	}{{def, true}, {mixed, false}} {
		srv, cli, err := RenderConfigs(Options{Variant: c.v}, "/etc/openvpn")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(srv, "disable-dco") != c.disable || strings.Contains(cli, "disable-dco") != c.disable {
			t.Errorf("variant %s: disable-dco %v expected; server:\n%s\nclient:\n%s", c.v.Name, c.disable, srv, cli)
		}
	}
	if mixed.String() != "dcobig=dco;sndbuf 1048576" {
		t.Errorf("String() = %q", mixed.String())
	}
}
