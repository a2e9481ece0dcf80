package main

import (
	"strings"
	"testing"
)

func TestEachLineSkipsBlankAndReadsLongLines(t *testing.T) {
	long := strings.Repeat("ab", 300_000) // longer than the reader's buffer
	input := "\n  0a0b  \n\n" + long + "\r\nff"
	var got []string
	var nums []int
	err := eachLine(strings.NewReader(input), func(n int, line []byte) error {
		got = append(got, string(line))
		nums = append(nums, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != "0a0b" || got[1] != long || got[2] != "ff" {
		t.Fatalf("lines = %d %q…", len(got), got[0])
	}
	if nums[0] != 2 || nums[1] != 4 || nums[2] != 5 {
		t.Fatalf("line numbers = %v, want [2 4 5]", nums)
	}
	b, err := decodeHexLine([]byte("0A0b"))
	if err != nil || len(b) != 2 || b[0] != 0x0a || b[1] != 0x0b {
		t.Fatalf("decodeHexLine = %x, %v", b, err)
	}
	if _, err := decodeHexLine([]byte("0g")); err == nil {
		t.Fatal("decodeHexLine accepted invalid hex")
	}
}
