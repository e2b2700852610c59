// An independent verifier for ALP's transparency log (issue 20), written against Go's
// golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog (Debian's golang-golang-x-mod-dev),
// sharing no code with ALP. It reads one JSON request on stdin and writes one JSON answer on stdout:
//
//   - records: the leaf data (ALP's 32-byte audit entry hashes, hex); Go builds its own tree of them
//     with tlog.StoredHashes, so roots and proofs are recomputed here, not taken from ALP;
//   - notes: signed notes opened with note.NewVerifier + note.Open; the checkpoint body parsed here;
//     with a signer key, Go signs the same text (Ed25519 is deterministic: the notes must be equal);
//   - roots: tlog.TreeHash of the first size records compared with ALP's root;
//   - inclusion: tlog.CheckRecord of ALP's proof against ALP's root, and tlog.ProveRecord's own proof;
//   - consistency: tlog.CheckTree of ALP's proof against ALP's roots, and tlog.ProveTree's own proof;
//   - tiles: tlog.ReadTileData of the same tile, and its path.
//
// Run offline: GOPATH=/usr/share/gocode GO111MODULE=off go build (test/audit/tlog/go-verifier.test.ts).
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type noteCase struct {
	ID   string `json:"id"`
	Note string `json:"note"`
	Vkey string `json:"vkey"`
	Skey string `json:"skey,omitempty"`
}

type rootCase struct {
	ID   string `json:"id"`
	Size int64  `json:"size"`
	Root string `json:"root"`
}

type inclusionCase struct {
	ID     string   `json:"id"`
	Size   int64    `json:"size"`
	Index  int64    `json:"index"`
	Record string   `json:"record,omitempty"` // hex; default: records[index]
	Root   string   `json:"root"`
	Proof  []string `json:"proof"`
}

type consistencyCase struct {
	ID      string   `json:"id"`
	Old     int64    `json:"old"`
	New     int64    `json:"new"`
	OldRoot string   `json:"old_root"`
	NewRoot string   `json:"new_root"`
	Proof   []string `json:"proof"`
}

type tileCase struct {
	ID     string `json:"id"`
	Size   int64  `json:"size"`
	Height int    `json:"height"`
	Level  int    `json:"level"`
	Index  int64  `json:"index"`
	Width  int    `json:"width"`
	Data   string `json:"data"`
}

type request struct {
	Records     []string          `json:"records"`
	Notes       []noteCase        `json:"notes"`
	Roots       []rootCase        `json:"roots"`
	Inclusion   []inclusionCase   `json:"inclusion"`
	Consistency []consistencyCase `json:"consistency"`
	Tiles       []tileCase        `json:"tiles"`
}

type result struct {
	ID       string `json:"id"`
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
	SameAsGo bool   `json:"same_as_go"`
	Text     string `json:"text,omitempty"`
	Origin   string `json:"origin,omitempty"`
	Size     int64  `json:"size,omitempty"`
	Root     string `json:"root,omitempty"`
	GoPath   string `json:"go_path,omitempty"`
	GoSigned string `json:"go_signed,omitempty"`
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

func decodeHash(s string) (tlog.Hash, error) {
	var h tlog.Hash
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != tlog.HashSize {
		return h, fmt.Errorf("not a base64 hash: %q", s)
	}
	copy(h[:], b)
	return h, nil
}

func decodeHashes(list []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(list))
	for i, s := range list {
		h, err := decodeHash(s)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

func b64(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

func main() {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fail("bad request: %v", err)
	}
	records := make([][]byte, len(req.Records))
	var stored []tlog.Hash
	reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			if x < 0 || x >= int64(len(stored)) {
				return nil, fmt.Errorf("no stored hash %d", x)
			}
			out[i] = stored[x]
		}
		return out, nil
	})
	for i, r := range req.Records {
		data, err := hex.DecodeString(r)
		if err != nil || len(data) != 32 {
			fail("record %d is not 32 bytes of hex", i)
		}
		records[i] = data
		hashes, err := tlog.StoredHashes(int64(i), data, reader)
		if err != nil {
			fail("StoredHashes(%d): %v", i, err)
		}
		stored = append(stored, hashes...)
	}

	out := []result{}
	for _, c := range req.Notes {
		out = append(out, openNote(c))
	}
	for _, c := range req.Roots {
		r := result{ID: c.ID}
		th, err := tlog.TreeHash(c.Size, reader)
		if err != nil {
			r.Error = err.Error()
		} else {
			r.Root = b64(th)
			r.OK = r.Root == c.Root
		}
		out = append(out, r)
	}
	for _, c := range req.Inclusion {
		out = append(out, checkInclusion(c, records, reader))
	}
	for _, c := range req.Consistency {
		out = append(out, checkConsistency(c, reader))
	}
	for _, c := range req.Tiles {
		r := result{ID: c.ID}
		t := tlog.Tile{H: c.Height, L: c.Level, N: c.Index, W: c.Width}
		r.GoPath = t.Path()
		data, err := tlog.ReadTileData(t, tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
			// ReadTileData may only use hashes of a tree of c.Size records.
			for _, x := range ix {
				if x >= tlog.StoredHashCount(c.Size) {
					return nil, fmt.Errorf("tile needs stored hash %d, beyond a tree of %d", x, c.Size)
				}
			}
			return reader.ReadHashes(ix)
		}))
		if err != nil {
			r.Error = err.Error()
		} else {
			r.OK = base64.StdEncoding.EncodeToString(data) == c.Data
		}
		out = append(out, r)
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string][]result{"results": out}); err != nil {
		fail("write: %v", err)
	}
}

func openNote(c noteCase) result {
	r := result{ID: c.ID}
	v, err := note.NewVerifier(c.Vkey)
	if err != nil {
		r.Error = "NewVerifier: " + err.Error()
		return r
	}
	n, err := note.Open([]byte(c.Note), note.VerifierList(v))
	if err != nil {
		r.Error = "Open: " + err.Error()
		return r
	}
	r.OK = true
	r.Text = n.Text
	// The C2SP checkpoint body: origin, decimal size, base64 root (extension lines may follow).
	lines := strings.SplitN(n.Text, "\n", 4)
	if len(lines) >= 4 {
		r.Origin = lines[0]
		if size, err := strconv.ParseInt(lines[1], 10, 64); err == nil && strconv.FormatInt(size, 10) == lines[1] {
			r.Size = size
		}
		if h, err := decodeHash(lines[2]); err == nil {
			r.Root = b64(h)
		}
	}
	if c.Skey != "" {
		s, err := note.NewSigner(c.Skey)
		if err != nil {
			r.Error = "NewSigner: " + err.Error()
			r.OK = false
			return r
		}
		signed, err := note.Sign(&note.Note{Text: n.Text}, s)
		if err != nil {
			r.Error = "Sign: " + err.Error()
			r.OK = false
			return r
		}
		r.GoSigned = string(signed)
	}
	return r
}

func checkInclusion(c inclusionCase, records [][]byte, reader tlog.HashReader) result {
	r := result{ID: c.ID}
	root, err1 := decodeHash(c.Root)
	proof, err2 := decodeHashes(c.Proof)
	if err1 != nil || err2 != nil || c.Index < 0 || c.Index >= int64(len(records)) {
		r.Error = "malformed case"
		return r
	}
	data := records[c.Index]
	if c.Record != "" {
		data, _ = hex.DecodeString(c.Record)
	}
	if err := tlog.CheckRecord(tlog.RecordProof(proof), c.Size, root, c.Index, tlog.RecordHash(data)); err != nil {
		r.Error = err.Error()
	} else {
		r.OK = true
	}
	if own, err := tlog.ProveRecord(c.Size, c.Index, reader); err == nil {
		r.SameAsGo = sameHashes(own, proof)
	}
	return r
}

func checkConsistency(c consistencyCase, reader tlog.HashReader) result {
	r := result{ID: c.ID}
	oldRoot, err1 := decodeHash(c.OldRoot)
	newRoot, err2 := decodeHash(c.NewRoot)
	proof, err3 := decodeHashes(c.Proof)
	if err1 != nil || err2 != nil || err3 != nil {
		r.Error = "malformed case"
		return r
	}
	if err := tlog.CheckTree(tlog.TreeProof(proof), c.New, newRoot, c.Old, oldRoot); err != nil {
		r.Error = err.Error()
	} else {
		r.OK = true
	}
	if own, err := tlog.ProveTree(c.New, c.Old, reader); err == nil {
		r.SameAsGo = sameHashes(own, proof)
	}
	return r
}

func sameHashes(a, b []tlog.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i][:], b[i][:]) {
			return false
		}
	}
	return true
}
