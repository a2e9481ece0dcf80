// The JavaScript yjs oracle: the reference the Go package yjs is compared against.
//
// Protocol: one JSON request per line on stdin, one JSON response per line on stdout, in
// request order:
//
//   -> {"id":1,"op":"apply","args":{...}}
//   <- {"id":1,"ok":true,"result":{...}}   or   {"id":1,"ok":false,"error":"message"}
//
// Bytes travel as standard base64 (with padding). A bad request is answered with an error;
// the process never exits on one. It exits when stdin closes. See README.md for every op.

import * as Y from 'yjs'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'

// stdout carries the protocol only: anything a library logs goes to stderr.
const writeOut = process.stdout.write.bind(process.stdout)
console.log = console.info = console.debug = (...a) => console.error(...a)

const versionOf = (pkg) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url), 'utf8')).version

class RequestError extends Error {}
const fail = (msg) => { throw new RequestError(msg) }

// ---------------------------------------------------------------------------------------
// Arguments and bytes

// A character class repeated, not a group: a repeated group makes the regexp engine recurse
// once per group, and a string of some MiB overflows its stack.
const B64 = /^[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]==|[A-Za-z0-9+/]{2}=)?$/

const fromB64 = (s, what) => {
  if (typeof s !== 'string' || s.length % 4 !== 0 || !B64.test(s)) fail(`${what} must be a base64 string`)
  const b = Buffer.from(s, 'base64')
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength)
}

const toB64 = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString('base64')

const bytesArg = (args, name) => fromB64(args[name], name)

const bytesListArg = (args, name, optional = false) => {
  const v = args[name]
  if (v === undefined || v === null) {
    if (optional) return []
    fail(`${name} is required (an array of base64 strings)`)
  }
  if (!Array.isArray(v)) fail(`${name} must be an array of base64 strings`)
  return v.map((s, i) => fromB64(s, `${name}[${i}]`))
}

const boolArg = (args, name, dflt) => {
  const v = args[name]
  if (v === undefined || v === null) return dflt
  if (typeof v !== 'boolean') fail(`${name} must be a boolean`)
  return v
}

const intArg = (args, name, dflt, min, max) => {
  const v = args[name] ?? dflt
  if (!Number.isSafeInteger(v) || v < min || v > max) fail(`${name} must be an integer in [${min}, ${max}]`)
  return v
}

// gc defaults to true (as in Y.Doc); {"noGC":true} is accepted as the Go-friendly spelling.
const gcArg = (args) => boolArg(args, 'noGC', false) ? false : boolArg(args, 'gc', true)

// ---------------------------------------------------------------------------------------
// JSON rules (README.md): every value becomes plain JSON.

const hex = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString('hex')

const normalize = (v) => {
  if (v === undefined) return { $undefined: true }
  if (v === null) return null
  switch (typeof v) {
    case 'number':
      if (Number.isNaN(v)) return { $number: 'NaN' }
      if (v === Infinity) return { $number: 'Infinity' }
      if (v === -Infinity) return { $number: '-Infinity' }
      return Object.is(v, -0) ? 0 : v
    case 'bigint': return { $bigint: v.toString() }
    case 'string':
    case 'boolean': return v
  }
  if (v instanceof Uint8Array) return { $bytes: hex(v) }
  if (v instanceof Y.Doc) return { $doc: v.guid }
  if (v instanceof Y.AbstractType) return normalize(v.toJSON())
  if (Array.isArray(v)) return v.map(normalize)
  if (typeof v === 'object') {
    const o = {}
    for (const k of Object.keys(v)) {
      Object.defineProperty(o, k, { value: normalize(v[k]), enumerable: true, writable: true, configurable: true })
    }
    return o
  }
  fail(`cannot represent a ${typeof v} as JSON`)
}

// Canonical JSON text (object keys sorted) for convergence checks inside the oracle.
const canonical = (v) => {
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']'
  if (v !== null && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map(k => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}'
  }
  return JSON.stringify(v)
}

// ---------------------------------------------------------------------------------------
// Roots

const ROOT_TYPES = {
  map: (doc, name) => doc.getMap(name),
  array: (doc, name) => doc.getArray(name),
  text: (doc, name) => doc.getText(name),
  xml: (doc, name) => doc.getXmlFragment(name)
}

const rootsArg = (args) => {
  const r = args.roots
  if (r === undefined || r === null) return null
  if (typeof r !== 'object' || Array.isArray(r)) fail('roots must be an object {name: "map"|"array"|"text"|"xml"}')
  for (const [name, t] of Object.entries(r)) {
    if (!Object.hasOwn(ROOT_TYPES, t)) fail(`roots.${name}: unknown type ${JSON.stringify(t)} (want map, array, text or xml)`)
  }
  return r
}

const defineRoots = (doc, roots) => {
  for (const [name, t] of Object.entries(roots)) ROOT_TYPES[t](doc, name)
}

// The inference rule of GUIDE §7 (nmcr doc json without --root), for roots not declared:
// keyed items → map; string, format or embed content → text; otherwise array.
const inferRootType = (type) => {
  if (type._map.size > 0) return 'map'
  for (let n = type._start; n !== null; n = n.right) {
    const c = n.content
    if (c instanceof Y.ContentString || c instanceof Y.ContentFormat || c instanceof Y.ContentEmbed) return 'text'
  }
  return 'array'
}

// Instantiates undeclared roots by inference; returns {name: type} for every root of the doc.
const resolveRoots = (doc, roots) => {
  const out = {}
  for (const name of [...doc.share.keys()]) {
    const t = roots && Object.hasOwn(roots, name) ? roots[name] : inferRootType(doc.share.get(name))
    ROOT_TYPES[t](doc, name)
    out[name] = t
  }
  return out
}

const rootsJSON = (doc, roots) => {
  const json = {}
  for (const [name, t] of Object.entries(roots)) {
    const type = ROOT_TYPES[t](doc, name)
    json[name] = t === 'xml' ? type.toString() : normalize(type.toJSON())
  }
  return json
}

const hasPending = (doc) => doc.store.pendingStructs !== null || doc.store.pendingDs !== null

// ---------------------------------------------------------------------------------------
// Ops on updates

const opApply = (args) => {
  const updates = bytesListArg(args, 'updates')
  const declared = rootsArg(args)
  const svs = bytesListArg(args, 'stateVectors', true)
  const doc = new Y.Doc({ gc: gcArg(args) })
  if (declared) defineRoots(doc, declared)
  updates.forEach((u, i) => {
    try {
      Y.applyUpdate(doc, u)
    } catch (e) {
      fail(`updates[${i}]: applyUpdate failed: ${e.message}`)
    }
  })
  const roots = declared ?? resolveRoots(doc, null)
  const deltas = {}
  if (args.deltas === true) {
    for (const [name, t] of Object.entries(roots)) {
      if (t === 'text') deltas[name] = normalize(doc.getText(name).toDelta())
    }
  }
  return {
    roots,
    json: rootsJSON(doc, roots),
    deltas,
    stateVector: toB64(Y.encodeStateVector(doc)),
    state: toB64(Y.encodeStateAsUpdate(doc)),
    diffs: svs.map(sv => toB64(Y.encodeStateAsUpdate(doc, sv))),
    pending: hasPending(doc)
  }
}

const guarded = (what, f) => {
  try {
    return f()
  } catch (e) {
    if (e instanceof RequestError) throw e
    fail(`${what} failed: ${e.message}`)
  }
}

const opMerge = (args) => {
  const updates = bytesListArg(args, 'updates')
  return { update: toB64(guarded('mergeUpdates', () => Y.mergeUpdates(updates))) }
}

const opDiff = (args) => {
  const update = bytesArg(args, 'update')
  const sv = bytesArg(args, 'stateVector')
  return { update: toB64(guarded('diffUpdate', () => Y.diffUpdate(update, sv))) }
}

const opSVFromUpdate = (args) => {
  const update = bytesArg(args, 'update')
  return { stateVector: toB64(guarded('encodeStateVectorFromUpdate', () => Y.encodeStateVectorFromUpdate(update))) }
}

const opDecodeSV = (args) => {
  const sv = bytesArg(args, 'stateVector')
  const m = guarded('decodeStateVector', () => Y.decodeStateVector(sv))
  const clocks = {}
  m.forEach((clock, client) => { clocks[client] = clock })
  return { clocks }
}

const opEncodeSV = (args) => {
  const c = args.clocks
  if (c === null || typeof c !== 'object' || Array.isArray(c)) fail('clocks must be an object {client: clock}')
  const m = new Map()
  for (const [k, v] of Object.entries(c)) {
    const client = Number(k)
    if (!/^(0|[1-9][0-9]*)$/.test(k) || client > 0xffffffff) fail(`clocks: bad client ${JSON.stringify(k)}`)
    if (!Number.isSafeInteger(v) || v < 0) fail(`clocks.${k}: bad clock`)
    m.set(client, v)
  }
  return { stateVector: toB64(Y.encodeStateVector(m)) }
}

// A readable rendering of an update's structs and delete set, for diagnosing differences.
const renderID = (id) => id === null ? null : [id.client, id.clock]

const renderContent = (c) => {
  if (c instanceof Y.ContentString) return { kind: 'string', str: c.str }
  if (c instanceof Y.ContentAny) return { kind: 'any', values: c.arr.map(normalize) }
  if (c instanceof Y.ContentJSON) return { kind: 'json', values: c.arr.map(normalize) }
  if (c instanceof Y.ContentBinary) return { kind: 'binary', bytes: hex(c.content) }
  if (c instanceof Y.ContentDeleted) return { kind: 'deleted', len: c.len }
  if (c instanceof Y.ContentEmbed) return { kind: 'embed', embed: normalize(c.embed) }
  if (c instanceof Y.ContentFormat) return { kind: 'format', key: c.key, value: normalize(c.value) }
  if (c instanceof Y.ContentDoc) return { kind: 'doc', guid: c.doc.guid, opts: normalize(c.opts) }
  if (c instanceof Y.ContentType) {
    const t = c.type
    if (t instanceof Y.XmlElement) return { kind: 'type', type: 'xmlElement', nodeName: t.nodeName }
    if (t instanceof Y.XmlHook) return { kind: 'type', type: 'xmlHook', hookName: t.hookName }
    if (t instanceof Y.XmlText) return { kind: 'type', type: 'xmlText' }
    if (t instanceof Y.XmlFragment) return { kind: 'type', type: 'xmlFragment' }
    if (t instanceof Y.Text) return { kind: 'type', type: 'text' }
    if (t instanceof Y.Map) return { kind: 'type', type: 'map' }
    if (t instanceof Y.Array) return { kind: 'type', type: 'array' }
    return { kind: 'type', type: 'unknown' }
  }
  return { kind: 'unknown' }
}

const opDecodeUpdate = (args) => {
  const update = bytesArg(args, 'update')
  const { structs, ds } = guarded('decodeUpdate', () => Y.decodeUpdate(update))
  const out = structs.map(s => {
    const base = { id: renderID(s.id), length: s.length }
    if (s instanceof Y.GC) return { struct: 'gc', ...base }
    if (s instanceof Y.Skip) return { struct: 'skip', ...base }
    return {
      struct: 'item',
      ...base,
      origin: renderID(s.origin),
      rightOrigin: renderID(s.rightOrigin),
      parent: typeof s.parent === 'string' ? s.parent : s.parent === null ? null : renderID(s.parent),
      parentSub: s.parentSub,
      content: renderContent(s.content)
    }
  })
  const deletes = []
  ds.clients.forEach((items, client) => {
    for (const it of items) deletes.push({ client, clock: it.clock, len: it.len })
  })
  return { structs: out, deleteSet: deletes }
}

// ---------------------------------------------------------------------------------------
// Random histories

// xoshiro128** seeded through splitmix32 from the two 32-bit halves of the seed.
const makeRng = (seed) => {
  let sm = (seed % 0x100000000) ^ Math.imul(Math.floor(seed / 0x100000000), 0x9e3779b9)
  const splitmix = () => {
    sm = (sm + 0x9e3779b9) | 0
    let z = sm
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
    return (z ^ (z >>> 16)) >>> 0
  }
  let a = splitmix(); let b = splitmix(); let c = splitmix(); let d = splitmix()
  const next = () => {
    const r = Math.imul(((Math.imul(b, 5) << 7) | (Math.imul(b, 5) >>> 25)), 9) >>> 0
    const t = b << 9
    c ^= a; d ^= b; b ^= c; a ^= d; c ^= t
    d = (d << 11) | (d >>> 21)
    return r
  }
  const rng = {
    u32: next,
    int: (n) => n <= 0 ? 0 : Math.floor(next() / 0x100000000 * n), // [0, n)
    range: (lo, hi) => lo + rng.int(hi - lo + 1), // [lo, hi]
    chance: (p) => next() / 0x100000000 < p,
    pick: (arr) => arr[rng.int(arr.length)],
    shuffle: (arr) => {
      for (let i = arr.length - 1; i > 0; i--) {
        const j = rng.int(i + 1)
        ;[arr[i], arr[j]] = [arr[j], arr[i]]
      }
      return arr
    }
  }
  return rng
}

const FEATURES = {
  map: 'operations on the root Y.Map "map"',
  array: 'operations on the root Y.Array "array"',
  text: 'operations on the root Y.Text "text"',
  xml: 'operations on the root Y.XmlFragment "xml" (elements, attributes, Y.XmlText)',
  nested: 'nested Y.Map/Y.Array/Y.Text (and Y.Xml* when xml) as values, edited later',
  subdoc: 'subdocuments (Y.Doc values, ContentDoc)',
  binary: 'Uint8Array values (ContentBinary, and inside any values)',
  bigint: 'bigint values inside any values',
  undefined: 'undefined values',
  negZero: '-0 as a number value',
  nonFinite: 'NaN and ±Infinity as number values',
  format: 'text formatting (insert with attributes, format, removal with null)',
  embed: 'text embeds (insertEmbed with an object)',
  astral: 'strings with characters outside the BMP (emoji, surrogate pairs)',
  splitSurrogates: 'text positions that may fall inside a surrogate pair (off by default: JS yjs itself ' +
    'then diverges, since the U+FFFD written by a local split is not in any update; no convergence check)',
  sync: 'random partial syncs between steps (false: clients only meet at the end)',
  outOfOrder: 'partial syncs that deliver single updates out of causal order (pending structs)',
  transactions: 'several operations in one transaction'
}

const OFF_BY_DEFAULT = new Set(['splitSurrogates'])

const featuresArg = (args) => {
  const f = {}
  for (const k of Object.keys(FEATURES)) f[k] = !OFF_BY_DEFAULT.has(k)
  const given = args.features
  if (given === undefined || given === null) return f
  if (typeof given !== 'object' || Array.isArray(given)) fail('features must be an object {name: bool}')
  for (const [k, v] of Object.entries(given)) {
    if (!Object.hasOwn(FEATURES, k)) fail(`unknown feature ${JSON.stringify(k)} (known: ${Object.keys(FEATURES).join(', ')})`)
    if (typeof v !== 'boolean') fail(`features.${k} must be a boolean`)
    f[k] = v
  }
  return f
}

const HISTORY_ROOTS = { map: 'map', array: 'array', text: 'text', xml: 'xml' }
const MAP_KEYS = ['a', 'b', 'c', 'key', 'ключ', '🔑', '0', '10', '']
const BMP_STRINGS = ['', 'x', 'hello', 'ünïcödé', '日本語', 'Ω≈ç√', 'tab\tnew\nline', '"q"\\', '<&>']
const ASTRAL_STRINGS = ['😀', 'a😀b', '👩‍👩‍👧', '𝄞clef', '🇩🇪']
const CHARS_BMP = 'abcxyz éüß日本ж '
const CHARS_ASTRAL = ['😀', '🎉', '𝄞', '👍🏽']
const XML_NAMES = ['p', 'div', 'span', 'h1', 'DIV', 'li']
const TEXT_FORMATS = [{ bold: true }, { italic: true }, { color: '#ff0000' }, { color: 'blue' },
  { bold: null }, { italic: null }, { bold: true, color: 'green' }, { link: { href: 'https://example.com/ä' } }]
// Y.XmlText.toString renders a format value's own keys as tag attributes; string values
// would render character by character, so XML text formats use true or flat objects only.
const XML_TEXT_FORMATS = [{ bold: true }, { italic: true }, { bold: null }, { a: { href: 'x.html' } }, { em: true, bold: true }]
const EMBEDS = [{ image: 'https://example.com/i.png' }, { formula: 'e=mc^2' }, { mention: { id: 7, name: 'Zoë' } }]
const MAX_DEPTH = 3

const makeGen = (rng, f, nextGuid) => {
  const gen = {}
  gen.str = (n = rng.range(0, 6)) => {
    if (rng.chance(0.3)) return rng.pick(f.astral && rng.chance(0.4) ? ASTRAL_STRINGS : BMP_STRINGS)
    let s = ''
    for (let i = 0; i < n; i++) {
      s += f.astral && rng.chance(0.15) ? rng.pick(CHARS_ASTRAL) : CHARS_BMP[rng.int(CHARS_BMP.length)]
    }
    return s
  }
  gen.number = () => {
    const kinds = [
      () => rng.range(-1000, 1000),
      () => rng.pick([2 ** 31 - 1, 2 ** 31, -(2 ** 31) + 1, -(2 ** 31), -(2 ** 31) - 1, 2 ** 32, 2 ** 53 - 1, -(2 ** 53 - 1)]),
      () => rng.range(0, 2 ** 20) * 2 ** 20 + rng.range(0, 2 ** 20), // large, > 2^31
      () => rng.range(-64, 64) / 8, // float32-exact fractions
      () => rng.pick([0.1, -2.5e-8, Math.PI, 1e300, -1e-300, 123456.789, 2 ** 60]),
      () => 0
    ]
    if (f.negZero) kinds.push(() => -0)
    if (f.nonFinite) kinds.push(() => rng.pick([NaN, Infinity, -Infinity]))
    return rng.pick(kinds)()
  }
  gen.bytes = () => {
    const b = new Uint8Array(rng.range(0, 12))
    for (let i = 0; i < b.length; i++) b[i] = rng.int(256)
    return b
  }
  // A lib0 "any" value (ContentAny): JSON-like, plus bytes, bigint and undefined.
  // Y.Array.insert refuses undefined and bigint elements (Y.Map.set takes them), so a
  // list element (listItem) has them only nested.
  gen.any = (depth = 0, listItem = false) => {
    const kinds = [
      () => null, () => rng.chance(0.5), () => gen.number(), () => gen.number(), () => gen.str(), () => gen.str()
    ]
    if (f.undefined && !listItem) kinds.push(() => undefined)
    if (f.bigint && !listItem) kinds.push(() => BigInt(rng.pick([0, 1, -1, 2 ** 53, -(2 ** 62), 2 ** 62])) + BigInt(rng.range(0, 99)))
    if (f.binary) kinds.push(() => gen.bytes())
    if (depth < 3) {
      kinds.push(() => Array.from({ length: rng.range(0, 4) }, () => gen.any(depth + 1)))
      kinds.push(() => {
        const o = {}
        const n = rng.range(0, 4)
        for (let i = 0; i < n; i++) o[rng.pick(MAP_KEYS)] = gen.any(depth + 1)
        return o
      })
    }
    return rng.pick(kinds)()
  }
  gen.subdoc = () => {
    const opts = { guid: nextGuid() }
    if (rng.chance(0.3)) opts.meta = { title: gen.str(), n: rng.range(0, 9) }
    if (rng.chance(0.3)) opts.autoLoad = true
    if (rng.chance(0.2)) opts.gc = false
    return new Y.Doc(opts)
  }
  // A fresh (preliminary) shared type, sometimes with content set before integration.
  gen.type = (depth) => {
    const kinds = [
      () => {
        const m = new Y.Map()
        if (rng.chance(0.5)) m.set(rng.pick(MAP_KEYS), gen.any())
        return m
      },
      () => Y.Array.from(rng.chance(0.5) ? [gen.any(0, true), gen.any(0, true)] : []),
      () => new Y.Text(rng.chance(0.5) ? gen.str() : '')
    ]
    if (f.xml) {
      kinds.push(() => gen.xmlElement(depth))
      kinds.push(() => new Y.XmlText(gen.str()))
    }
    return rng.pick(kinds)()
  }
  gen.xmlElement = (depth) => {
    const el = new Y.XmlElement(rng.pick(XML_NAMES))
    if (rng.chance(0.5)) el.setAttribute(rng.pick(['id', 'class', 'data-x', 'title']), gen.str())
    if (depth < MAX_DEPTH && rng.chance(0.3)) el.insert(0, [new Y.XmlText(gen.str())])
    return el
  }
  // A value for Y.Map.set or Y.Array.insert: any, bytes, a shared type or a subdocument.
  gen.value = (depth, listItem = false) => {
    const r = rng.int(20)
    if (r < 2 && f.binary) return gen.bytes()
    if (r < 5 && f.nested && depth < MAX_DEPTH) return gen.type(depth + 1)
    if (r < 6 && f.subdoc) return gen.subdoc()
    return gen.any(0, listItem)
  }
  return gen
}

// kind of a shared type, most specific first (XmlText extends Text, XmlElement extends XmlFragment).
const kindOf = (t) => {
  if (t instanceof Y.XmlText) return 'xmlText'
  if (t instanceof Y.XmlElement) return 'xmlElement'
  if (t instanceof Y.XmlFragment) return 'xmlFragment'
  if (t instanceof Y.Text) return 'text'
  if (t instanceof Y.Map) return 'map'
  if (t instanceof Y.Array) return 'array'
  return null
}

// Every live shared type reachable from the roots, with its nesting depth.
const collectTypes = (doc, f) => {
  const out = []
  const walk = (t, depth, path) => {
    const kind = kindOf(t)
    if (kind === null) return
    out.push({ t, kind, depth, path })
    if (kind === 'map') {
      t.forEach((v, k) => { if (v instanceof Y.AbstractType) walk(v, depth + 1, `${path}.${k}`) })
    } else if (kind === 'array' || kind === 'xmlFragment' || kind === 'xmlElement') {
      t.toArray().forEach((v, i) => { if (v instanceof Y.AbstractType) walk(v, depth + 1, `${path}[${i}]`) })
    }
  }
  if (f.map) walk(doc.getMap('map'), 0, 'map')
  if (f.array) walk(doc.getArray('array'), 0, 'array')
  if (f.text) walk(doc.getText('text'), 0, 'text')
  if (f.xml) walk(doc.getXmlFragment('xml'), 0, 'xml')
  return out
}

const show = (v) => {
  try {
    return JSON.stringify(normalize(v instanceof Y.AbstractType ? v.constructor.name : v))
  } catch {
    return String(v)
  }
}

const makeOps = (rng, f, gen) => {
  // A text position in [0, len]; unless splitSurrogates, moved off the middle of a pair.
  const textPos = (str, hi = str.length) => {
    let p = rng.range(0, hi)
    if (!f.splitSurrogates) {
      while (p > 0 && p < str.length && /[\uD800-\uDBFF]/.test(str[p - 1])) p--
    }
    return p
  }
  const textRange = (str) => {
    const start = textPos(str, str.length - 1)
    let end = Math.min(str.length, start + rng.range(1, 8))
    if (!f.splitSurrogates) {
      while (end < str.length && /[\uD800-\uDBFF]/.test(str[end - 1])) end++
    }
    return [start, end - start]
  }
  // A fresh copy: Y.Text.insert adds the attributes it negates to the object it is given.
  const pickFormat = (formats) => structuredClone(rng.pick(formats))
  const textOps = (t, formats, path) => {
    // positions count UTF-16 units, and 1 for each embed (U+FFFC stands in for it here)
    const s = t.toDelta().map(d => typeof d.insert === 'string' ? d.insert : '\uFFFC').join('')
    const r = rng.int(20)
    if (s.length > 0 && r < 5) {
      const [i, n] = textRange(s)
      t.delete(i, n)
      return `${path}.delete(${i},${n})`
    }
    if (s.length > 0 && r < 9 && f.format) {
      const [i, n] = textRange(s)
      const a = pickFormat(formats)
      t.format(i, n, a)
      return `${path}.format(${i},${n},${show(a)})`
    }
    const i = textPos(s)
    if (r < 11 && f.embed && t instanceof Y.Text && !(t instanceof Y.XmlText)) {
      const e = structuredClone(rng.pick(EMBEDS))
      t.insertEmbed(i, e, f.format && rng.chance(0.3) ? pickFormat(formats) : undefined)
      return `${path}.insertEmbed(${i},${show(e)})`
    }
    const str = gen.str(rng.range(1, 8)) || 'z'
    if (f.format && rng.chance(0.3)) {
      const a = pickFormat(formats)
      t.insert(i, str, a)
      return `${path}.insert(${i},${show(str)},${show(a)})`
    }
    t.insert(i, str)
    return `${path}.insert(${i},${show(str)})`
  }
  const listDelete = (t, path) => {
    const i = rng.int(t.length)
    const n = Math.min(t.length - i, rng.range(1, 5))
    t.delete(i, n)
    return `${path}.delete(${i},${n})`
  }
  return {
    map: ({ t, depth, path }) => {
      const r = rng.int(20)
      if (r < 4) {
        const keys = [...t.keys()]
        const k = keys.length > 0 && rng.chance(0.8) ? rng.pick(keys) : rng.pick(MAP_KEYS)
        t.delete(k)
        return `${path}.delete(${show(k)})`
      }
      if (r < 5 && rng.chance(0.3)) {
        t.clear()
        return `${path}.clear()`
      }
      const k = rng.pick(MAP_KEYS)
      const v = gen.value(depth)
      t.set(k, v)
      return `${path}.set(${show(k)},${show(v)})`
    },
    array: ({ t, depth, path }) => {
      const r = rng.int(20)
      if (t.length > 0 && r < 7) return listDelete(t, path)
      const vals = Array.from({ length: rng.range(1, 4) }, () => gen.value(depth, true))
      if (r < 9) {
        t.push(vals)
        return `${path}.push(${vals.length})`
      }
      if (r < 10) {
        t.unshift(vals)
        return `${path}.unshift(${vals.length})`
      }
      const i = rng.range(0, t.length)
      t.insert(i, vals)
      return `${path}.insert(${i},${vals.length})`
    },
    text: ({ t, path }) => textOps(t, TEXT_FORMATS, path),
    xmlText: ({ t, path }) => textOps(t, XML_TEXT_FORMATS, path),
    xmlFragment: ({ t, depth, path }) => {
      const r = rng.int(20)
      if (t.length > 0 && r < 6) return listDelete(t, path)
      if (r < 10 && t instanceof Y.XmlElement) {
        const k = rng.pick(['id', 'class', 'data-x', 'title'])
        if (rng.chance(0.25)) {
          t.removeAttribute(k)
          return `${path}.removeAttribute(${show(k)})`
        }
        const v = gen.str()
        t.setAttribute(k, v)
        return `${path}.setAttribute(${show(k)},${show(v)})`
      }
      const nodes = Array.from({ length: rng.range(1, 3) }, () =>
        rng.chance(0.5) && depth < MAX_DEPTH + 1 ? gen.xmlElement(depth + 1) : new Y.XmlText(gen.str(rng.range(1, 6)))
      )
      const i = rng.range(0, t.length)
      t.insert(i, nodes)
      return `${path}.insert(${i},${nodes.length})`
    }
  }
}

const opHistory = (args, v2 = false) => {
  const seed = intArg(args, 'seed', 0, 0, Number.MAX_SAFE_INTEGER)
  const nClients = intArg(args, 'clients', 3, 1, 32)
  const steps = intArg(args, 'steps', 50, 0, 100000)
  const gc = gcArg(args)
  const f = featuresArg(args)
  if (!f.map && !f.array && !f.text && !f.xml) fail('features: at least one of map, array, text, xml must be on')
  const rng = makeRng(seed)

  const ids = []
  while (ids.length < nClients) {
    const id = rng.u32()
    if (!ids.includes(id)) ids.push(id)
  }
  let guidN = 0
  const nextGuid = () => `sub-${seed}-${guidN++}`
  const gen = makeGen(rng, f, nextGuid)
  const ops = makeOps(rng, f, gen)

  const REMOTE = Symbol('remote')
  const log = [] // {client, update, desc, start, end}: every local transaction, in creation order
  let recording = true
  let editing = null // the client running the current step's transaction
  let current = '' // its description
  const clients = ids.map((id) => {
    const doc = new Y.Doc({ gc })
    doc.clientID = id
    defineRoots(doc, HISTORY_ROOTS)
    doc.on('update', (update, origin, _doc, tr) => {
      if (!recording || !tr.local) return
      // Y.Text removes redundant formatting after a remote transaction, in a local one.
      const desc = editing === id ? current : 'formatting cleanup after a remote update'
      log.push({ client: id, update, desc, start: tr.beforeState.get(id) ?? 0, end: tr.afterState.get(id) ?? 0, tr })
    })
    // yjs emits 'updateV2' right after 'update', for the same transaction
    if (v2) {
      doc.on('updateV2', (update, origin, _doc, tr) => {
        if (!recording || !tr.local) return
        const e = log[log.length - 1]
        if (e === undefined || e.tr !== tr || e.updateV2 !== undefined) fail(`oracle bug: seed ${seed}: an updateV2 event without its update event`)
        e.updateV2 = update
      })
    }
    return { id, doc, seen: new Set() }
  })

  const partialSync = () => {
    const a = rng.pick(clients)
    if (f.outOfOrder && rng.chance(0.5)) {
      // deliver a few of the others' single updates that it lacks, in random order
      const sv = Y.decodeStateVector(Y.encodeStateVector(a.doc))
      const lacking = []
      log.forEach((e, i) => {
        const deletesOnly = e.start === e.end
        if (e.client !== a.id && !a.seen.has(i) && (deletesOnly || (sv.get(e.client) ?? 0) < e.end)) lacking.push(i)
      })
      for (const i of rng.shuffle(lacking).slice(0, rng.range(1, 6))) {
        Y.applyUpdate(a.doc, log[i].update, REMOTE)
        a.seen.add(i)
      }
    } else {
      // state-vector sync from another client
      const b = rng.pick(clients)
      if (b !== a) Y.applyUpdate(a.doc, Y.encodeStateAsUpdate(b.doc, Y.encodeStateVector(a.doc)), REMOTE)
    }
  }

  for (let s = 0; s < steps; s++) {
    const c = rng.pick(clients)
    const n = f.transactions ? rng.pick([1, 1, 1, 2, 3, 4]) : 1
    const descs = []
    editing = c.id
    c.doc.transact(() => {
      for (let k = 0; k < n; k++) {
        const types = collectTypes(c.doc, f)
        const target = rng.pick(rng.chance(0.5) ? types.filter(x => x.depth === 0) : types)
        descs.push(ops[target.kind === 'xmlElement' ? 'xmlFragment' : target.kind](target))
      }
      current = `step ${s}: ${descs.join('; ')}`
    })
    editing = null
    if (f.sync && nClients > 1 && rng.chance(0.35)) partialSync()
  }

  // The converged document: every update applied in creation order to a fresh doc. The
  // final syncs below only check convergence: what they make clients write (formatting
  // cleanups) is not part of the history.
  recording = false
  const ref = new Y.Doc({ gc })
  defineRoots(ref, HISTORY_ROOTS)
  for (const e of log) Y.applyUpdate(ref, e.update, REMOTE)
  if (hasPending(ref)) fail(`oracle bug: seed ${seed}: the reference doc has pending structs after every update`)
  const json = rootsJSON(ref, HISTORY_ROOTS)
  const sv = Y.encodeStateVector(ref)
  const state = Y.encodeStateAsUpdate(ref)
  const want = canonical(json)
  for (const c of clients) {
    Y.applyUpdate(c.doc, Y.encodeStateAsUpdate(ref, Y.encodeStateVector(c.doc)), REMOTE)
    if (f.splitSurrogates) continue
    if (c.doc.clientID !== c.id) fail(`oracle bug: seed ${seed}: client ${c.id} changed its clientID`)
    if (hasPending(c.doc)) fail(`oracle bug: seed ${seed}: client ${c.id} has pending structs after a full sync`)
    const got = canonical(rootsJSON(c.doc, HISTORY_ROOTS))
    if (got !== want) {
      let i = 0
      while (i < got.length && got[i] === want[i]) i++
      fail(`oracle bug: seed ${seed}: client ${c.id} did not converge: ...${want.slice(Math.max(0, i - 80), i + 80)} vs ...${got.slice(Math.max(0, i - 80), i + 80)}`)
    }
    if (Buffer.compare(Y.encodeStateVector(c.doc), sv) !== 0) fail(`oracle bug: seed ${seed}: client ${c.id} state vector differs`)
  }
  const result = {
    seed,
    clients: ids,
    updates: log.map(e => ({ client: e.client, update: toB64(e.update), desc: e.desc })),
    roots: HISTORY_ROOTS,
    json,
    stateVector: toB64(sv),
    state: toB64(state)
  }
  if (v2) {
    log.forEach((e, i) => {
      if (e.updateV2 === undefined) fail(`oracle bug: seed ${seed}: update ${i} has no updateV2`)
      result.updates[i].updateV2 = toB64(e.updateV2)
      result.updates[i].v1FromV2 = toB64(Y.convertUpdateFormatV2ToV1(e.updateV2))
    })
    const stateV2 = Y.encodeStateAsUpdateV2(ref)
    result.stateV2 = toB64(stateV2)
    result.stateV1FromV2 = toB64(Y.convertUpdateFormatV2ToV1(stateV2))
  }
  return result
}

// ---------------------------------------------------------------------------------------
// B4 benchmark, the JS side

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

const opB4 = (args) => {
  if (typeof args.path !== 'string' || args.path === '') fail('path must be the trace file path')
  const runs = intArg(args, 'runs', 3, 1, 100)
  let trace
  try {
    trace = JSON.parse(readFileSync(args.path, 'utf8'))
  } catch (e) {
    fail(`reading ${args.path}: ${e.message}`)
  }
  if (!Array.isArray(trace)) fail('the trace must be a JSON array of operations')
  trace.forEach((op, i) => {
    const ok = Array.isArray(op) && Number.isSafeInteger(op[0]) && op[0] >= 0 &&
      ((op[1] === 0 && op.length === 3 && typeof op[2] === 'string') || (op[1] === 1 && op.length === 2))
    if (!ok) fail(`trace[${i}]: want [pos, 0, "text"] or [pos, 1]`)
  })

  const replay = (capture) => {
    const doc = new Y.Doc()
    const text = doc.getText('text')
    const updates = []
    if (capture) doc.on('update', u => updates.push(u))
    const t0 = performance.now()
    for (const op of trace) {
      if (op[1] === 0) text.insert(op[0], op[2])
      else text.delete(op[0], 1)
    }
    return { ms: performance.now() - t0, doc, text, updates }
  }
  const timed = (f) => {
    f() // warm-up
    const samples = []
    let last
    for (let i = 0; i < runs; i++) {
      last = f()
      samples.push(last.ms)
    }
    return { ms: median(samples), last }
  }

  const apply = timed(() => replay(false))
  const capture = timed(() => replay(true))
  const { doc, text, updates } = capture.last
  const encode = timed(() => {
    const t0 = performance.now()
    const state = Y.encodeStateAsUpdate(doc)
    return { ms: performance.now() - t0, state }
  })
  const state = encode.last.state
  const decode = timed(() => {
    const d = new Y.Doc()
    const t0 = performance.now()
    Y.applyUpdate(d, state)
    return { ms: performance.now() - t0, doc: d }
  })
  const decodedLength = decode.last.doc.getText('text').length
  const first = updates.slice(0, 10000)
  const merge = timed(() => {
    const t0 = performance.now()
    const merged = Y.mergeUpdates(first)
    return { ms: performance.now() - t0, merged }
  })

  const result = {
    ops: trace.length,
    runs,
    finalLength: text.length,
    decodedLength,
    applyMs: apply.ms,
    applyCaptureMs: capture.ms,
    updateCount: updates.length,
    updateBytes: updates.reduce((n, u) => n + u.byteLength, 0),
    encodeMs: encode.ms,
    stateBytes: state.byteLength,
    decodeMs: decode.ms,
    mergeCount: first.length,
    mergeMs: merge.ms,
    mergedBytes: merge.last.merged.byteLength,
    node: process.version,
    yjs: versionOf('yjs')
  }
  // Heap held by the final document: only when node runs with --expose-gc.
  if (typeof globalThis.gc === 'function') {
    apply.last = capture.last = decode.last = merge.last = encode.last = null
    globalThis.gc()
    const before = process.memoryUsage().heapUsed
    let held = replay(false)
    globalThis.gc()
    result.heapBytes = Math.max(0, process.memoryUsage().heapUsed - before)
    held = held.text.length // release the doc only after the measurement
    void held
  }
  return result
}

// ---------------------------------------------------------------------------------------
// Dispatch

const OPS = {
  ping: () => ({ node: process.version, yjs: versionOf('yjs'), lib0: versionOf('lib0'), yProtocols: versionOf('y-protocols') }),
  apply: opApply,
  merge: opMerge,
  diff: opDiff,
  svFromUpdate: opSVFromUpdate,
  decodeSV: opDecodeSV,
  encodeSV: opEncodeSV,
  decodeUpdate: opDecodeUpdate,
  history: opHistory,
  historyV2: (args) => opHistory(args, true),
  b4: opB4
}

const respond = (obj) => {
  let line
  try {
    line = JSON.stringify(obj)
  } catch (e) {
    line = JSON.stringify({ id: obj.id, ok: false, error: `cannot encode the response: ${e.message}` })
  }
  writeOut(line + '\n')
}

const handle = (line) => {
  let req
  try {
    req = JSON.parse(line)
  } catch (e) {
    // Answer with the id if the line starts like a request, so the caller is not left waiting.
    const m = /^\s*\{\s*"id"\s*:\s*(\d+)/.exec(line)
    return respond({ id: m ? Number(m[1]) : null, ok: false, error: `request is not JSON: ${e.message}` })
  }
  if (req === null || typeof req !== 'object' || Array.isArray(req)) {
    return respond({ id: null, ok: false, error: 'request must be a JSON object' })
  }
  const id = Number.isSafeInteger(req.id) ? req.id : null
  try {
    if (id === null) fail('request id must be an integer')
    if (typeof req.op !== 'string' || !Object.hasOwn(OPS, req.op)) fail(`unknown op ${JSON.stringify(req.op)} (known: ${Object.keys(OPS).join(', ')})`)
    const args = req.args ?? {}
    if (typeof args !== 'object' || Array.isArray(args)) fail('args must be an object')
    respond({ id, ok: true, result: OPS[req.op](args) })
  } catch (e) {
    const msg = e instanceof RequestError ? e.message : `${req.op}: ${e && e.stack ? e.stack : e}`
    respond({ id, ok: false, error: msg })
  }
}

// Lines of any length: chunks are kept until a newline arrives.
let pending = []
process.stdin.on('data', (chunk) => {
  let start = 0
  for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
    pending.push(chunk.subarray(start, nl))
    const line = Buffer.concat(pending).toString('utf8')
    pending = []
    start = nl + 1
    if (line.trim() !== '') handle(line)
  }
  if (start < chunk.length) pending.push(chunk.subarray(start))
})
process.stdin.on('end', () => process.exit(0))
process.on('uncaughtException', (e) => { console.error('oracle: uncaught exception:', e) })
