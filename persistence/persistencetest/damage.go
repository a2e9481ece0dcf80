package persistencetest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Damage done to a closed store file, the way a failing disk or an interrupted copy
// damages it, for the tests of what a store, a node and nmcr make of it.

// FlipIn flips one bit in the middle of the only occurrence of needle in the file at path:
// a record holding needle no longer matches its checksum.
func FlipIn(path string, needle []byte) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.Index(data, needle)
	if i < 0 || bytes.Contains(data[i+1:], needle) {
		return fmt.Errorf("%q is not in %s exactly once", needle, path)
	}
	data[i+len(needle)/2] ^= 0x20
	return os.WriteFile(path, data, 0o600)
}

// PageSize is the page size of the stores the tests make (bbolt's default on Linux).
const PageSize = 4096

// BreakPageOf overwrites the header of the page holding the only occurrence of needle with
// garbage: a page of an unknown type, which bbolt cannot read.
func BreakPageOf(path string, needle []byte) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.Index(data, needle)
	if i < 0 || bytes.Contains(data[i+1:], needle) {
		return fmt.Errorf("%q is not in %s exactly once", needle, path)
	}
	page := i / PageSize * PageSize
	for j := page + 8; j < page+16; j++ { // flags, count, overflow; the page id stays
		data[j] = 0xA5
	}
	return os.WriteFile(path, data, 0o600)
}

// Truncate cuts the file at path to size bytes.
func Truncate(path string, size int64) error { return os.Truncate(path, size) }

// SetFormat rewrites the format marker of the closed store file at path to store format
// version, as a version of Nomicore writing that format would (a valid record, so only the
// version differs).
func SetFormat(path string, version int) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		if meta == nil {
			return fmt.Errorf("%s has no meta bucket", path)
		}
		return meta.Put([]byte("format"), formatRecord(version))
	})
}

// formatRecord is the record of meta/format naming store format version, written from the
// record layout persistence documents (record.go): magic 0xC5, record version 1, kind 1,
// the CRC-32C of key, kind and payload, then the payload.
func formatRecord(version int) []byte {
	payload := []byte("nomicore-persistence/" + strconv.Itoa(version))
	crc := crc32.Update(0, crc32.MakeTable(crc32.Castagnoli), []byte("format"))
	crc = crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), []byte{1})
	crc = crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), payload)
	rec := []byte{0xC5, 1, 1}
	rec = binary.BigEndian.AppendUint32(rec, crc)
	return append(rec, payload...)
}
