package hf_test

import (
	"context"
	"testing"

	"github.com/lazyweights/tensorfs/backing/hf"
	"github.com/lazyweights/tensorfs/backing/hf/hftest"
	"github.com/lazyweights/tensorfs/backing/remote"
	"github.com/lazyweights/tensorfs/backing/remote/storetest"
)

// conformanceToken is the token the suite's stores send to the Hub.
const conformanceToken = "hf_conformanceT0kenSecret"

// TestConformance runs the stores' conformance suite against hftest's
// Hub: a repository whose files are in Git LFS (resolve's 302 to the
// CDN's presigned URLs, which expire), and one whose files are in git
// (resolve's 307 to resolve-cache, on the Hub); replies held or cut
// wherever the bytes come from; and one whose files are in Xet (the
// 302 to the Xet bridge, whose S3-style signed URLs expire), with a cap
// on unranged GETs below every file's size.
func TestConformance(t *testing.T) {
	t.Run("lfs", func(t *testing.T) { storetest.Run(t, hfHarness(true, false)) })
	t.Run("git", func(t *testing.T) { storetest.Run(t, hfHarness(false, false)) })
	t.Run("xet", func(t *testing.T) { storetest.Run(t, hfHarness(true, true)) })
}

func hfHarness(lfs, xet bool) storetest.Harness {
	return func(t *testing.T, objects map[string][]byte) *storetest.Fixture {
		t.Setenv("HF_HUB_OFFLINE", "")
		srv := hftest.New()
		t.Cleanup(srv.Close)
		srv.BridgeUnrangedMax = 0
		// The bytes of a file in LFS come from the CDN, of one in git
		// from the Hub: the Holder holds the replies of both.
		var hold storetest.Holder
		srv.WrapCDN(hold.Wrap)
		srv.WrapHub(hold.Wrap)
		var files []hftest.File
		for k, v := range objects {
			files = append(files, hftest.File{Path: k, Data: v, LFS: lfs, Xet: xet})
		}
		srv.Commit("org/conformance", "main", files...)
		srv.Repo("org/gated", false, true)
		srv.Commit("org/gated", "main", hftest.File{Path: "weights.bin", Data: []byte("gated bytes"), LFS: lfs, Xet: xet})
		open := func(t *testing.T, repo string) remote.Store {
			st, _, err := hf.Open(context.Background(), "hf://"+repo, hf.Options{Endpoint: srv.Hub.URL, Token: conformanceToken, HubCache: t.TempDir(), Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
		f := &storetest.Fixture{
			Store:   open(t, "org/conformance"),
			Holder:  &hold,
			Denied:  func(t *testing.T) (remote.Store, string) { return open(t, "org/gated"), "weights.bin" },
			Secrets: []string{conformanceToken, "Signature="},
			Lacks: map[string]string{
				"Redirect": "the store follows resolve's one redirect itself (every read here goes through it) and refuses another",
			},
		}
		if xet {
			t.Cleanup(func() {
				if n := srv.BridgeUnranged.Load(); n != 0 {
					t.Errorf("%d unranged GETs of the Xet bridge", n)
				}
			})
		}
		if lfs {
			f.Replace = func(t *testing.T, key string, data []byte) {
				srv.ReplaceBlob(hftest.SHA256(objects[key]), data)
			}
			f.Expire = func(t *testing.T) { srv.Expire() }
		} else {
			why := "a file in git is named by the pinned commit: it cannot change under a reader"
			f.Lacks["Replace"] = why
			f.Lacks["Expire"] = "a file in git is read from the Hub's resolve-cache: no signed URL"
		}
		return f
	}
}
