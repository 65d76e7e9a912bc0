package nodescript

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/quorumlock/redlock/internal/luascript"
)

// TestSourcesAreUnchanged holds every assembled script to the SHA-256 of its
// source when the scripts left the root package (3694064): a move must not
// change a byte the nodes run. A deliberate change to a script updates its
// digest here, in the same commit.
func TestSourcesAreUnchanged(t *testing.T) {
	for _, s := range []struct {
		name, digest string
		s            *luascript.Script
	}{
		{"Acquire", "bc4594c443ac5b9d02c8a695150dbd8db25c20c80d694312f0718415750865e0", Acquire}, {"FencedAcquire", "c2fc67bd1ec8a1de2be965e677771f9416ea5f8ff7e32bfdac2a870d41720226", FencedAcquire}, {"Commit", "754a17c5a6796fb56bb8cfbfc0aaa8ceb113e682104bd6d6c9262da9667ef0b5", Commit},
		{"Release", "f3ca76fbbfc79afb096403071d4381231404ee0647bb647084ed6b190ef16f84", Release}, {"Extend", "1c25a7504ce2d03ff36654313b78d8cfd88c315b944fc94b2e62da91991c2381", Extend}, {"FencedExtend", "cc8fb27ec7d12a87de4a93267de5a086ffac5e3ebb9e7810b69c46e66829163a", FencedExtend},
		{"Inspect", "c4601c08d6a64cc137ecd7bffb7d39f6707ad84857ac47d13d908d904f172950", Inspect}, {"Leave", "7e5c6053c713637130f700d1070357a9df72b7f8cb7c571b23599fd39c1cfef2", Leave}, {"Yield", "95bfae6ed7247807575559b65648b434aa958a16e3910abd799eaf7f3f74c1e9", Yield},
		{"NodeState", "611f56e2ba728cba16eef008fab2cc5563f04e038788d6d08ed1c53655b8f04e", NodeState}, {"Claim", "3264795c4308cd5cf9e38848ad3f7492db4b0e4f2012a458aa13e07da6b2ac9c", Claim}, {"Roster", "80e75d160aad1b383f74607b5b0bfd3b8856bddfe3b671bc1fd95412a9717bd9", Roster},
		{"Assign", "aa7f55f7543ff80895d9830cef5e0ffada7689a4f59a42f552377ea75007fc6c", Assign}, {"Reset", "a668ef3dde0f9e3008ebb578505b4bcffe140f18e722460fd22ca6adef999910", Reset}, {"SwapUUID", "787271075151ed4af1700eb34035c944fd4a1c8f06eca71a1657eda371b19209", SwapUUID}, {"Repair", "35d7d64017d7543e929f613307a26ddf15bc0b6675ddcd6e21cc74af4159e779", Repair},
	} {
		sum := sha256.Sum256([]byte(s.s.Source()))
		if got := hex.EncodeToString(sum[:]); got != s.digest {
			t.Errorf("%s: source digest %s, want %s", s.name, got, s.digest)
		}
	}
}
