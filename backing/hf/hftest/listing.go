package hftest

// The repository info, tree and paths-info answers.

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// entry is one item of the tree and paths-info APIs (hf_api.py's
// RepoFile, RepoFolder).
type entry struct {
	Type string    `json:"type"`
	OID  string    `json:"oid"`
	Size int64     `json:"size"`
	Path string    `json:"path"`
	LFS  *lfsEntry `json:"lfs,omitempty"`
	// XetHash is a file in Xet's hash (hf_api.py's RepoFile.xet_hash).
	XetHash string `json:"xetHash,omitempty"`
}

type lfsEntry struct {
	OID         string `json:"oid"`
	Size        int64  `json:"size"`
	PointerSize int64  `json:"pointerSize"`
}

func fileEntry(f *stored) entry {
	if f.LFS {
		return entry{Type: "file", OID: f.oid, Size: int64(len(f.Data)), Path: f.Path, LFS: &lfsEntry{OID: f.sha256, Size: int64(len(f.Data)), PointerSize: f.ptrSize}, XetHash: f.xetHash}
	}
	return entry{Type: "file", OID: f.oid, Size: int64(len(f.Data)), Path: f.Path}
}

func (s *Server) info(w http.ResponseWriter, k, sha string, rp *repo, tree map[string]*stored) {
	type sibling struct {
		RFilename string `json:"rfilename"`
	}
	var sib []sibling
	for _, p := range sortedPaths(tree) {
		sib = append(sib, sibling{p})
	}
	_, id, _ := strings.Cut(k, "/")
	var gated any = false
	if rp.gated {
		gated = "auto"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": id, "sha": sha, "private": rp.private, "gated": gated, "siblings": sib})
}

func sortedPaths(tree map[string]*stored) []string {
	var ps []string
	for p := range tree {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// tree lists dir (recursively with ?recursive=true), a page at a time:
// ?cursor=N starts at entry N.
func (s *Server) tree(w http.ResponseWriter, r *http.Request, sha string, tree map[string]*stored, dir string) {
	dir = strings.Trim(dir, "/")
	recursive := r.URL.Query().Get("recursive") == "true" || r.URL.Query().Get("recursive") == "True"
	var all []entry
	dirs := map[string]bool{}
	found := dir == ""
	for _, p := range sortedPaths(tree) {
		rel := p
		if dir != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(p, dir+"/"); !ok {
				continue
			}
		}
		found = true
		if i := strings.IndexByte(rel, '/'); i >= 0 {
			// The folders on the way, once each.
			for j := i; j >= 0; {
				d := rel[:j]
				if !dirs[d] {
					dirs[d] = true
					full := d
					if dir != "" {
						full = dir + "/" + d
					}
					all = append(all, entry{Type: "directory", OID: GitOID([]byte(full)), Path: full})
				}
				if !recursive {
					break
				}
				k := strings.IndexByte(rel[j+1:], '/')
				if k < 0 {
					break
				}
				j = j + 1 + k
			}
			if !recursive {
				continue
			}
		}
		all = append(all, fileEntry(tree[p]))
	}
	if !found {
		hubError(w, 404, "EntryNotFound", dir+" does not exist on \""+sha+"\"")
		return
	}
	cursor, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	start := max(0, min(cursor, len(all)))
	end := min(len(all), start+max(1, s.PageSize))
	if s.TreeFault == TreeEndless && start == len(all) {
		start = max(0, len(all)-max(1, s.PageSize))
	}
	next := ""
	switch {
	case s.TreeFault == TreeSelf:
		next = s.Hub.URL + r.URL.RequestURI()
	case end < len(all) || s.TreeFault == TreeEndless:
		q := r.URL.Query()
		q.Set("cursor", strconv.Itoa(max(end, cursor+1)))
		next = s.Hub.URL + r.URL.EscapedPath() + "?" + q.Encode()
	}
	if next != "" {
		w.Header().Set("Link", "<"+next+`>; rel="next"`)
	}
	w.Header().Set("Content-Type", "application/json")
	page := all[start:end]
	if page == nil {
		page = []entry{}
	}
	json.NewEncoder(w).Encode(page)
}

func (s *Server) pathsInfo(w http.ResponseWriter, tree map[string]*stored, paths []string) {
	out := []entry{}
	for _, p := range paths {
		if f, ok := tree[p]; ok {
			out = append(out, fileEntry(f))
			continue
		}
		for q := range tree {
			if strings.HasPrefix(q, p+"/") {
				out = append(out, entry{Type: "directory", OID: GitOID([]byte(p)), Path: p})
				break
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}
