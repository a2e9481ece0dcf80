package yjs

import "testing"

func TestUpdateRanges(t *testing.T) {
	a := NewDoc(WithClientID(5))
	var updates [][]byte
	a.OnUpdate(func(u []byte, _ any) { updates = append(updates, u) })
	a.GetText("t").Insert(0, "abc", nil)
	a.GetText("t").Insert(3, "de", nil)
	b := NewDoc(WithClientID(9))
	if err := ApplyUpdate(b, updates[0], nil); err != nil {
		t.Fatal(err)
	}
	var fromB []byte
	b.OnUpdate(func(u []byte, _ any) { fromB = u })
	b.GetText("t").Insert(0, "x", nil)

	from, to, err := UpdateRanges(updates[1])
	if err != nil || from[5] != 3 || to[5] != 5 || len(from) != 1 {
		t.Fatalf("second update: from %v to %v err %v", from, to, err)
	}
	merged, err := MergeUpdates([][]byte{updates[0], updates[1], fromB})
	if err != nil {
		t.Fatal(err)
	}
	from, to, err = UpdateRanges(merged)
	if err != nil || from[5] != 0 || to[5] != 5 || from[9] != 0 || to[9] != 1 || len(to) != 2 {
		t.Fatalf("merged: from %v to %v err %v", from, to, err)
	}
	if _, _, err := UpdateRanges(updates[1][:len(updates[1])-1]); err == nil {
		t.Fatal("a truncated update was accepted")
	}
}
