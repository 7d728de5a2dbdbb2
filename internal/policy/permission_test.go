package policy

import (
	"encoding/json"
	"testing"
)

// TestPermission_ShellCommandsAreExecuteWhateverTheLabel: a tool call with
// a shell command in rawInput is judged "execute" even when the agent
// labels it a read or search (codex-acp 0.16 labels `find . -delete`
// "search"), so approve-reads never approves it; other kinds stay.
func TestPermission_ShellCommandsAreExecuteWhateverTheLabel(t *testing.T) {
	for _, c := range []struct {
		call string
		want string
	}{
		{`{"kind":"search","title":"find . -delete","rawInput":{"command":["bash","-lc","find . -delete"]}}`, "execute"},
		{`{"kind":"read","title":"cat a | tee b","rawInput":{"cmd":"cat a | tee b"}}`, "execute"},
		{`{"title":"Read file","rawInput":{"command":"cat /etc/passwd"}}`, "execute"},
		{`{"kind":"read","title":"Read a.txt","rawInput":{"file_path":"a.txt"}}`, "read"},
		{`{"kind":"edit","title":"Edit","rawInput":{"command":"str_replace"}}`, "edit"},
		{`{"kind":"search","title":"grep","rawInput":{"command":""}}`, "search"},
	} {
		var h ToolCallHead
		if err := json.Unmarshal([]byte(c.call), &h); err != nil {
			t.Fatal(err)
		}
		if got := Kind(h); got != c.want {
			t.Errorf("%s: policy kind %q, want %q", c.call, got, c.want)
		}
	}
}
