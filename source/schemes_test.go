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
