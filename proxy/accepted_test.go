package proxy

import (
	"encoding/json"
	"testing"
)

func TestTheHandBuiltAnswerIsTheJSONOfTheIDAndDuplicateFlag(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"evt_1", `quote"and\backslash`, "<&>", "sha256:" + "ab"} {
		for _, dup := range []bool{false, true} {
			var got struct {
				ID        string `json:"id"`
				Duplicate bool   `json:"duplicate"`
			}
			if err := json.Unmarshal(acceptedJSON(id, dup), &got); err != nil || got.ID != id || got.Duplicate != dup {
				t.Errorf("acceptedJSON(%q, %v) = %s: %+v, %v", id, dup, acceptedJSON(id, dup), got, err)
			}
		}
	}
}
