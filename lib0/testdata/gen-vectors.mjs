// Independent generator of lib0 encoding vectors, written against the JavaScript lib0
// package (the version pinned in testdata/golden/gen/package.json). The Go tests in lib0/
// check our encoder and decoder against its output; regenerate with `make golden`.
//
//   node lib0/testdata/gen-vectors.mjs [path/to/node_modules] > lib0/testdata/vectors.json
import { createRequire } from 'node:module'
import path from 'node:path'

const modules = path.resolve(process.argv[2] ?? new URL('../../testdata/golden/gen/node_modules', import.meta.url).pathname)
const require = createRequire(path.join(modules, 'noop.js'))
const encoding = require('lib0/dist/encoding.cjs')
const lib0pkg = require('lib0/package.json')

const hex = (u8) => Buffer.from(u8).toString('hex')
const encode = (fn) => { const e = encoding.createEncoder(); fn(e); return hex(encoding.toUint8Array(e)) }

// JSON form of a JS value: tagged where JSON cannot say it (see lib0/vectors_test.go).
const tag = (v) => {
  if (v === undefined) return { $undefined: true }
  if (typeof v === 'bigint') return { $bigint: v.toString() }
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return { $number: 'NaN' }
    if (v === Infinity) return { $number: 'Infinity' }
    if (v === -Infinity) return { $number: '-Infinity' }
    if (Object.is(v, -0)) return { $number: '-0' }
    return v
  }
  if (v instanceof Uint8Array) return { $bytes: hex(v) }
  if (Array.isArray(v)) return v.map(tag)
  if (v !== null && typeof v === 'object') return { $object: Object.keys(v).map(k => [k, tag(v[k])]) }
  return v
}
// An object built from pairs in insertion order; the vector records those pairs, so the Go
// side must reproduce JS enumeration order itself.
const objFrom = (pairs) => { const o = {}; for (const [k, v] of pairs) o[k] = v; return o }
const pairsTag = (pairs) => ({ $object: pairs.map(([k, v]) => [k, tag(v)]) })

const vectors = []
for (const v of [0, 1, 127, 128, 255, 300, 16383, 16384, 2 ** 21, 2 ** 28, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 35 + 7, Number.MAX_SAFE_INTEGER]) {
  vectors.push({ kind: 'varUint', value: v, hex: encode(e => encoding.writeVarUint(e, v)) })
}
for (const v of [0, -0, 1, -1, 63, -63, 64, -64, 8191, 8192, -8192, 2 ** 31 - 1, -(2 ** 31), 2 ** 40 + 3, -(2 ** 40 + 3), Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER]) {
  vectors.push({ kind: 'varInt', value: tag(v), hex: encode(e => encoding.writeVarInt(e, v)) })
}
for (const s of ['', 'a', 'hello world', 'héllo', '日本語', '😀 emoji', 'x'.repeat(200)]) {
  vectors.push({ kind: 'varString', value: s, hex: encode(e => encoding.writeVarString(e, s)) })
}
for (const b of [[], [0], [1, 2, 3], Array.from({ length: 130 }, (_, i) => i)]) {
  const u8 = Uint8Array.from(b)
  vectors.push({ kind: 'varUint8Array', value: hex(u8), hex: encode(e => encoding.writeVarUint8Array(e, u8)) })
}
for (const v of [0, 1, 0xdeadbeef, 2 ** 32 - 1]) {
  vectors.push({ kind: 'uint32BE', value: v, hex: encode(e => encoding.writeUint32BigEndian(e, v)) })
}
for (const v of [0, 1.5, -2.25, 3.4028234663852886e38, 1e-45]) {
  vectors.push({ kind: 'float32', value: v, hex: encode(e => encoding.writeFloat32(e, v)) })
}
for (const v of [0, 0.1, -1e300, 5e-324]) {
  vectors.push({ kind: 'float64', value: v, hex: encode(e => encoding.writeFloat64(e, v)) })
}
for (const v of [0n, 1n, -1n, 9007199254740993n, -(2n ** 63n), 2n ** 63n - 1n]) {
  vectors.push({ kind: 'bigint64', value: v.toString(), hex: encode(e => encoding.writeBigInt64(e, v)) })
}

const anyValues = [
  undefined, null, true, false, 0, -0, 1, -1, 42, -64, 65, 2 ** 31 - 1, -(2 ** 31 - 1),
  2 ** 31, -(2 ** 31), 2 ** 40, 1.5, -2.25, 0.1, 1e300, 3.4028234663852886e38, NaN, Infinity,
  -Infinity, 5e-324, 12345678.9, 7n, -9007199254740993n, '', 'text', 'ünïcödé 😀',
  new Uint8Array([]), new Uint8Array([1, 2, 250]), [], [1, 'two', null, [3, [4]], true],
  { a: 1, b: 'x', c: [1, 2], d: { e: null } }
]
for (const v of anyValues) {
  vectors.push({ kind: 'any', value: tag(v), hex: encode(e => encoding.writeAny(e, v)) })
}
// Objects whose insertion order differs from JS enumeration order, and repeated keys.
const objectCases = [
  [['b', 1], ['2', 2], ['a', 3], ['1', 4], ['10', 5], ['01', 6], ['-1', 7], ['4294967295', 8], ['4294967294', 9]],
  [['z', 1], ['y', 2], ['z', 3]],
  [['k', { inner: [1, { '3': 'c', '0': 'a' }] }]]
]
for (const pairs of objectCases) {
  const o = objFrom(pairs)
  vectors.push({ kind: 'any', value: pairsTag(pairs), decoded: tag(o), hex: encode(e => encoding.writeAny(e, o)) })
}

process.stdout.write(JSON.stringify({ generator: 'lib0/testdata/gen-vectors.mjs', lib0: lib0pkg.version, vectors }, null, 1) + '\n')
