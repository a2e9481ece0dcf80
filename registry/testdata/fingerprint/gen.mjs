// Independent generator of the schema semantic-fingerprint vectors (a safe digest, §23.3) that
// registry/schema_test.go checks: written from the rule in docs/decisions.md, against the
// pinned JS lib0 of testdata/oracle, never from the Go code.
//
//   node registry/testdata/fingerprint/gen.mjs > registry/testdata/fingerprint/vectors.json
//
// Each vector: the definition as lib0 writeAny bytes (hex, so the Go test reads exactly the
// value JS holds: key order, -0), its canonical JSON, and the fingerprint
// "sha256:v1:" + hex(SHA-256("nomicore:schema:semantic-fingerprint:v1\0" + canonical)).
import { createHash } from 'node:crypto'
import * as encoding from '../../../testdata/oracle/node_modules/lib0/encoding.js'

// RFC 8785: JSON.stringify with every object's keys sorted by UTF-16 code units (the default
// JS sort order).
const canonical = (v) => {
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']'
  if (v !== null && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}'
  }
  return JSON.stringify(v)
}

const fingerprint = (c) =>
  'sha256:v1:' + createHash('sha256').update('nomicore:schema:semantic-fingerprint:v1\0' + c, 'utf8').digest('hex')

const vectors = [
  ['empty', {}],
  ['flat', { type: 'object', title: 'Note', required: true, version: 3 }],
  ['reordered', { version: 3, required: true, title: 'Note', type: 'object' }],
  ['nested', { fields: [{ name: 'a', type: 'string' }, { type: 'number', name: 'b', min: -2.5 }], meta: { x: null, y: [] } }],
  ['numbers', { a: 1, b: -0, c: 0.1, d: 1e21, e: 1e-7, f: 123456789012345680000, g: 5e-324, h: 1.7976931348623157e308, i: 0.000001, j: -1.5e300, k: 100, l: 1.25e-5 }],
  ['strings', { q: 'quote " backslash \\ slash /', c: 'tab\tnl\ncr\rbs\bff\f', u: '\u0001\u001f\u007f', x: 'é中😀' }],
  ['utf16-order', { '\uff61': 1, '😀': 2, a: 3, '\u00e9': 4, '': 5 }],
  ['index-keys', { 10: 'ten', 2: 'two', b: 'b', a: 'a' }],
  ['deep', { a: { b: { c: { d: [[[{ e: false }]]] } } } }],
]

const out = vectors.map(([name, def]) => {
  const enc = encoding.createEncoder()
  encoding.writeAny(enc, def)
  const c = canonical(def)
  return { name, any: Buffer.from(encoding.toUint8Array(enc)).toString('hex'), canonical: c, fingerprint: fingerprint(c) }
})
console.log(JSON.stringify(out, null, 1))
