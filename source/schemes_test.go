package source

import (
	"strings"
	"testing"
)

// TestSchemeOptions: every option of the table is whole (a flag name,
// its help, a Set), named once, and sets what it says: each row's
// switches put "true" into RemoteOptions and "false" back.
func TestSchemeOptions(t *testing.T) {
	seen := map[string]string{}
	for _, s := range Schemes() {
		for _, o := range s.Options {
			if o.Name == "" || strings.HasPrefix(o.Name, "-") || o.Help == "" || o.Set == nil {
				t.Errorf("%s: option %+v is not whole (a name without dashes, help, Set)", s.Prefix, o)
			}
			if other, dup := seen[o.Name]; dup {
				t.Errorf("option %s is %s's and %s's", o.Name, other, s.Prefix)
			}
			seen[o.Name] = s.Prefix
			if !o.Bool {
				continue
			}
			var on, off RemoteOptions
			if err := o.Set(&on, "true"); err != nil {
				t.Errorf("%s: --%s: %v", s.Prefix, o.Name, err)
			}
			if err := o.Set(&off, "false"); err != nil {
				t.Errorf("%s: --%s=false: %v", s.Prefix, o.Name, err)
			}
			if on.NoSign == off.NoSign && on.HF.CacheWrite == off.HF.CacheWrite && on.Remote.ProxyTerminatesTLS == off.Remote.ProxyTerminatesTLS {
				t.Errorf("%s: --%s sets nothing", s.Prefix, o.Name)
			}
		}
	}
	for name, want := range map[string]string{"no-sign-request": "s3://", "hf-cache-write": "hf://", "proxy-terminates-tls": "hf://"} {
		if seen[name] != want {
			t.Errorf("option %s is %q's, want %s's", name, seen[name], want)
		}
	}
}

// TestInsecureRegistryOption: --insecure-registry takes HOST[:PORT]s
// and makes only their oci:// SOURCEs plain http; anything else is a
// usage error.
func TestInsecureRegistryOption(t *testing.T) {
	var set func(*RemoteOptions, string) error
	for _, s := range Schemes() {
		for _, o := range s.Options {
			if o.Name == "insecure-registry" {
				if s.Name != "oci://" || o.Bool {
					t.Errorf("--insecure-registry is %s's, bool %v", s.Prefix, o.Bool)
				}
				set = o.Set
			}
		}
	}
	if set == nil {
		t.Fatal("no --insecure-registry option")
	}
	var o RemoteOptions
	if err := set(&o, "reg.lan:5000, Mirror.lan"); err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]bool{
		"oci://reg.lan:5000/m:t": true, "oci://mirror.lan/a/b": true,
		"oci://reg.lan/m": false, "oci://reg.lan:5001/m": false, "oci://other/m": false,
	} {
		if got := ociOptions(src, o).Insecure; got != want {
			t.Errorf("%s: Insecure %v, want %v", src, got, want)
		}
	}
	for _, bad := range []string{"http://reg.lan", "reg.lan/ns", "a,,b", "user@reg"} {
		if err := set(&o, bad); err == nil || !strings.Contains(err.Error(), "is not a registry HOST[:PORT]") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
