// largehist.mjs: large, reproducible multi-author Yjs histories made by the real JavaScript
// yjs, with every expectation the Go differential tests at scale compare against
// (yjs/large_test.go, through internal/testkit/oracle.Large). Nothing here is computed by Go.
//
//   node largehist.mjs CONFIG_JSON OUT_DIR
//
// CONFIG_JSON: {"seed": N, "mib": M, "authors": A, "updates": K, "refGC": bool, "keep": bool}.
// The history grows until its encoded state holds about M MiB. OUT_DIR must not exist; it is
// written whole (manifest.json and blobs/) and is the same, byte for byte, for equal configs.
//
// The history. A authors (Y.Doc, gc on, client ids drawn from the seed) edit in rounds. In a
// round each author runs 150 transactions of one operation each on the roots "text" and
// "rich" (Y.Text), "map" (Y.Map) and "list" (Y.Array) and on the types nested in them:
//
//   text: inserts near the author's cursor, which now and then jumps (mostly 1-24
//         characters, some of 64-1024), range deletions (some across hundreds of structs);
//   rich: the same, fewer, and formatting and removing formatting of ranges, formatted
//         inserts, embeds;
//   map:  sets of about 600 keys (so most sets overwrite), values plain or nested Y.Text,
//         Y.Array or Y.Map; deletions;
//   list: inserts of values and nested Y.Map at random positions, range deletions;
//   nested: the same edits inside the nested types, formatted texts included.
//
// At the end of a round every author applies what the others did in it, so the next round's
// edits are concurrent with each other but build on everything before. Each author owns
// thousands to hundreds of thousands of structs, so the Go struct lists run far beyond one
// chunk (512 structs).
//
// Two streams of updates are exported, each in format v1 and v2:
//
//   a: consecutive updates, about K of them, each encodeStateAsUpdate(ref, sv) of a
//      reference document (gc refGC) that pulls every author's state at checkpoints, from
//      the state vector of the previous checkpoint (what a hub sends a peer that catches
//      up): each carries new structs and the whole delete set;
//   b: every local transaction of every author (doc.on('update') / 'updateV2'), in the
//      order they were made.
//
// The paths. For GC on and off, a fresh Y.Doc with the roots declared applies: a in order,
// a shuffled and a reversed (structs and deletions wait as pending; with a look at the state
// halfway), mergeUpdates(a), mergeUpdates(a shuffled), a prefix then diffUpdate(merged, its
// state vector), a v2 in order and shuffled, mergeUpdatesV2(a v2), the reference's state in
// v1 and in v2, b in order, and b v2 in order (GC on only). For each path the manifest holds
// what JS yjs then has: the JSON of the roots, encodeStateVector, encodeStateAsUpdate,
// whether anything is pending, and (for some) encodeStateAsUpdate against state vectors
// taken at checkpoints and drawn at random. Update functions: mergeUpdates, diffUpdate of the
// merged update against every state vector, encodeStateVectorFromUpdate,
// convertUpdateFormatV2ToV1 of every update of a v2. The script checks that every author and
// every path converged to the reference document's JSON.
//
// manifest.json names inputs by the SHA-256 of their content (hex, 32 characters); blobs/
// <name> holds them. A list of updates is one blob of frames: a 4-byte little-endian length,
// then the bytes. Expected results are named by SHA-256 and length only (the states of every
// path would take tens of times the history's size), and kept as blobs too with "keep".

import * as Y from 'yjs'
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync, existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'

console.log = console.info = console.debug = (...a) => console.error(...a)

// ---------------------------------------------------------------------------------------
// Random numbers: xoshiro128** seeded through splitmix32 from the two 32-bit halves of the
// seed (the generator oracle.mjs uses too, so seeds mean the same kind of thing).

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
    next: () => next() / 0x100000000, // [0, 1)
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

// ---------------------------------------------------------------------------------------
// Configuration

const fail = (msg) => {
  console.error(`largehist: ${msg}`)
  process.exit(2)
}

if (process.argv.length !== 4) fail('usage: node largehist.mjs CONFIG_JSON OUT_DIR')
let cfg
try {
  cfg = JSON.parse(process.argv[2])
} catch (e) {
  fail(`CONFIG_JSON: ${e.message}`)
}
const num = (name, dflt, lo, hi) => {
  const v = cfg[name] ?? dflt
  if (typeof v !== 'number' || !(v >= lo && v <= hi)) fail(`${name} must be a number in [${lo}, ${hi}]`)
  return v
}
const seed = num('seed', 1, 0, 2 ** 53 - 1)
const targetBytes = Math.round(num('mib', 1, 0.01, 256) * 1024 * 1024)
const nAuthors = num('authors', 3, 1, 16)
const nUpdates = num('updates', 24, 2, 1000)
const refGC = cfg.refGC ?? true
const outDir = process.argv[3]
if (existsSync(outDir)) fail(`${outDir} exists`)

// ---------------------------------------------------------------------------------------
// Blobs

const tmpDir = outDir + '.tmp-' + process.pid
rmSync(tmpDir, { recursive: true, force: true })
mkdirSync(join(tmpDir, 'blobs'), { recursive: true })

const put = (u8) => {
  const name = createHash('sha256').update(u8).digest('hex').slice(0, 32)
  const path = join(tmpDir, 'blobs', name)
  if (!existsSync(path)) writeFileSync(path, u8)
  return name
}

const putList = (list) => {
  let n = 0
  for (const u of list) n += 4 + u.byteLength
  const out = new Uint8Array(n)
  const view = new DataView(out.buffer)
  let off = 0
  for (const u of list) {
    view.setUint32(off, u.byteLength, true)
    out.set(u, off + 4)
    off += 4 + u.byteLength
  }
  return put(out)
}

// An expected result is named by its SHA-256 and length only (the states of every path
// would take tens of times the history's size); with "keep": true in the config the bytes
// are kept too, for looking into a difference.
const keep = cfg.keep === true
const expected = (u8) => {
  const e = { sha256: createHash('sha256').update(u8).digest('hex'), len: u8.byteLength }
  if (keep) put(u8)
  return e
}

// JSON with sorted keys: paths that apply the same edits in another order build maps whose
// keys come in another order, and their views are then one blob.
const canonical = (v) => {
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']'
  if (v !== null && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map(k => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}'
  }
  return JSON.stringify(v)
}

// ---------------------------------------------------------------------------------------
// The JSON of the roots (the rules of README.md, for the values made here)

const hex = (u8) => Buffer.from(u8.buffer, u8.byteOffset, u8.byteLength).toString('hex')

const normalize = (v) => {
  if (v === undefined) return { $undefined: true }
  if (v === null) return null
  switch (typeof v) {
    case 'number': return Object.is(v, -0) ? 0 : v
    case 'string':
    case 'boolean': return v
  }
  if (v instanceof Uint8Array) return { $bytes: hex(v) }
  if (v instanceof Y.AbstractType) return normalize(v.toJSON())
  if (Array.isArray(v)) return v.map(normalize)
  if (typeof v === 'object') {
    const o = {}
    for (const k of Object.keys(v)) {
      Object.defineProperty(o, k, { value: normalize(v[k]), enumerable: true, writable: true, configurable: true })
    }
    return o
  }
  throw new Error(`cannot represent a ${typeof v} as JSON`)
}

const ROOTS = { text: 'text', rich: 'text', map: 'map', list: 'array' }

const declareRoots = (doc) => {
  doc.getText('text')
  doc.getText('rich')
  doc.getMap('map')
  doc.getArray('list')
}

const rootsJSON = (doc) => ({
  text: doc.getText('text').toJSON(),
  rich: doc.getText('rich').toJSON(),
  map: normalize(doc.getMap('map').toJSON()),
  list: normalize(doc.getArray('list').toJSON())
})

// ---------------------------------------------------------------------------------------
// Editing

const rng = makeRng(seed)

const WORDS = ['lorem', 'ipsum', 'dolor', 'sit', 'amet', 'consectetur', 'adipiscing', 'elit', 'sed', 'do',
  'eiusmod', 'tempor', 'ünïcödé', 'naïve', 'straße', '日本語', 'текст', 'Ωμέγα', 'x', 'yz', '—', 'tab\tin', 'new\nline']
const FORMATS = [{ bold: true }, { italic: true }, { color: '#c00' }, { bold: null }, { italic: null },
  { bold: true, color: 'teal' }, { link: { href: 'https://example.com/ä' } }, { color: null }]
const EMBEDS = [{ image: 'https://example.com/i.png' }, { formula: 'e=mc^2' }]
const ASTRAL = ['😀', '🎉', '𝄞 clef', '👩‍👩‍👧']

// Text made of words: BMP characters only, so that no random position falls inside a
// surrogate pair (JS yjs itself does not converge then).
const words = (chars) => {
  let s = ''
  while (s.length < chars) s += rng.pick(WORDS) + ' '
  return s.slice(0, chars)
}

const value = (depth = 0) => {
  switch (rng.int(depth < 2 ? 9 : 7)) {
    case 0: return rng.range(-100000, 100000)
    case 1: return rng.range(0, 2 ** 20) / 64
    case 2: return rng.chance(0.5)
    case 3: return null
    case 4: return rng.chance(0.2) ? rng.pick(ASTRAL) + words(rng.range(0, 12)) : words(rng.range(0, 40))
    case 5: {
      const b = new Uint8Array(rng.range(0, 16))
      for (let i = 0; i < b.length; i++) b[i] = rng.int(256)
      return b
    }
    case 6: return words(rng.range(1, 8))
    case 7: return Array.from({ length: rng.range(0, 4) }, () => value(depth + 1))
    default: {
      const o = {}
      for (let i = rng.range(0, 4); i > 0; i--) o[rng.pick(['a', 'b', 'title', 'n', 'ключ', '7'])] = value(depth + 1)
      return o
    }
  }
}

// A fresh nested type, sometimes with content before it is integrated.
const nestedType = () => {
  switch (rng.int(3)) {
    case 0: return new Y.Text(rng.chance(0.5) ? words(rng.range(1, 200)) : '')
    case 1: return Y.Array.from(Array.from({ length: rng.range(0, 6) }, () => value()))
    default: {
      const m = new Y.Map()
      for (let i = rng.range(0, 3); i > 0; i--) m.set('k' + rng.int(8), value())
      return m
    }
  }
}

const MAP_KEYS = 600

// An edit of a text. The root "text" is the large one and is never formatted: every remote
// transaction that deletes from a formatted text makes each receiver look at the formatting
// around each deleted item, and one that brings formatting makes it walk the whole text (JS
// cleanupYTextAfterTransaction; ours does the same), which would make large histories
// quadratic. The root "rich" gets about a tenth of the text edits, formatted and with embeds;
// nested texts are small and formatted too.
//
// In the root texts an author edits near its cursor and now and then jumps to a random place
// (JS finds a position from its search markers, so edits near the last one are cheap).
const PLAIN = { root: true, formatOdds: 0, embedOdds: 0, bigOdds: 0.3 }
const RICH = { root: true, formatOdds: 0.16, embedOdds: 0.01, bigOdds: 0.1 }
const NESTED = { root: false, formatOdds: 0.25, embedOdds: 0.02, bigOdds: 0 }
const cursors = new Map()
const textPos = (t, kind, hi) => {
  if (!kind.root) return rng.range(0, hi)
  let c = cursors.get(t) ?? 0
  c = rng.chance(0.04) ? rng.range(0, hi) : c + rng.range(-300, 300)
  c = Math.max(0, Math.min(hi, c))
  cursors.set(t, c)
  return c
}
const textEdit = (t, kind) => {
  const len = t.length
  const r = rng.next()
  if (len > 0 && r < 0.25) {
    const i = textPos(t, kind, len - 1)
    const n = Math.min(len - i, kind.root && rng.chance(0.1) ? rng.range(20, Math.max(20, Math.min(3000, Math.floor(len / 200)))) : rng.range(1, 24))
    t.delete(i, n)
  } else if (len > 0 && r < 0.25 + kind.formatOdds / 2) {
    const i = textPos(t, kind, len - 1)
    t.format(i, Math.min(len - i, rng.range(1, 300)), structuredClone(rng.pick(FORMATS)))
  } else if (r < 0.25 + kind.formatOdds / 2 + kind.embedOdds) {
    t.insertEmbed(textPos(t, kind, len), structuredClone(rng.pick(EMBEDS)))
  } else {
    const s = rng.chance(kind.bigOdds) ? words(rng.range(64, 1024)) : words(rng.range(1, 24))
    const i = textPos(t, kind, len)
    if (rng.chance(kind.formatOdds / 2)) t.insert(i, s, structuredClone(rng.pick(FORMATS)))
    else t.insert(i, s)
  }
}

const listEdit = (a) => {
  const len = a.length
  if (len > 0 && rng.chance(0.3)) {
    const i = rng.int(len)
    a.delete(i, Math.min(len - i, rng.range(1, 12)))
  } else {
    const vals = Array.from({ length: rng.range(1, 5) }, () => rng.chance(0.08) ? nestedType() : value())
    a.insert(rng.range(0, len), vals)
  }
}

const mapEdit = (m, keys) => {
  const key = 'key' + rng.int(keys)
  if (m.has(key) && rng.chance(0.1)) m.delete(key)
  else m.set(key, rng.chance(0.2) ? nestedType() : value())
}

// One transaction of one operation by an author.
const edit = (doc) => {
  const r = rng.int(100)
  doc.transact(() => {
    if (r < 56) {
      textEdit(doc.getText('text'), PLAIN)
    } else if (r < 62) {
      textEdit(doc.getText('rich'), RICH)
    } else if (r < 76) {
      mapEdit(doc.getMap('map'), MAP_KEYS)
    } else if (r < 86) {
      listEdit(doc.getArray('list'))
    } else {
      // a nested type of the map or the list
      const m = doc.getMap('map')
      const l = doc.getArray('list')
      const v = rng.chance(0.7) ? m.get('key' + rng.int(MAP_KEYS)) : (l.length > 0 ? l.get(rng.int(l.length)) : undefined)
      if (v instanceof Y.Text) textEdit(v, NESTED)
      else if (v instanceof Y.Array) listEdit(v)
      else if (v instanceof Y.Map) mapEdit(v, 8)
      else textEdit(doc.getText('text'), PLAIN)
    }
  })
}

// ---------------------------------------------------------------------------------------
// The history

const authors = []
const usedIDs = new Set()
for (let i = 0; i < nAuthors; i++) {
  const doc = new Y.Doc({ gc: true })
  let id
  do { id = rng.u32() } while (usedIDs.has(id) || id === 0)
  usedIDs.add(id)
  doc.clientID = id
  declareRoots(doc)
  authors.push(doc)
}

// stream b: every local transaction, v1 and v2
const streamB = []
const streamBV2 = []
let streamBBytes = 0
const roundOut = authors.map(() => [])
authors.forEach((doc, i) => {
  doc.on('update', (u, origin, d, tr) => {
    if (tr.local) {
      streamB.push(u)
      streamBBytes += u.byteLength
      roundOut[i].push(u)
    }
  })
  doc.on('updateV2', (u, origin, d, tr) => {
    if (tr.local) streamBV2.push(u)
  })
})

const ref = new Y.Doc({ gc: refGC })
declareRoots(ref)
const streamA = []
const streamAV2 = []
const checkpointSVs = [] // the reference's state vector after each update of a
let refSV = Y.encodeStateVector(ref)

const checkpoint = () => {
  for (const a of authors) Y.applyUpdate(ref, Y.encodeStateAsUpdate(a, Y.encodeStateVector(ref)))
  streamA.push(Y.encodeStateAsUpdate(ref, refSV))
  streamAV2.push(Y.encodeStateAsUpdateV2(ref, refSV))
  refSV = Y.encodeStateVector(ref)
  checkpointSVs.push(refSV)
}

// A checkpoint comes each time the local updates grew by what should add 1/K of the target
// state: their bytes per state byte are measured at each checkpoint.
const opsPerRound = 150
let bBytes = 0
let sinceCheckpoint = 0
let rounds = 0
let bPerState = 1
for (;;) {
  rounds++
  for (let i = 0; i < authors.length; i++) {
    for (let k = 0; k < opsPerRound; k++) edit(authors[i])
  }
  // everyone applies what the others did this round (their cleanups join the next round)
  const batches = roundOut.map(list => list.length > 0 ? Y.mergeUpdates(list.splice(0)) : null)
  authors.forEach((doc, i) => {
    batches.forEach((b, j) => { if (b !== null && j !== i) Y.applyUpdate(doc, b) })
  })
  const grown = streamBBytes - bBytes
  bBytes = streamBBytes
  sinceCheckpoint += grown
  if (sinceCheckpoint >= bPerState * targetBytes / nUpdates) {
    sinceCheckpoint = 0
    checkpoint()
    const stateBytes = Y.encodeStateAsUpdate(ref).byteLength
    if (stateBytes >= targetBytes) break
    bPerState = bBytes / stateBytes
  }
}
// formatting cleanups written while applying the last round reach everyone too
for (let pass = 0; pass < 2; pass++) {
  for (const a of authors) for (const b of authors) if (a !== b) Y.applyUpdate(b, Y.encodeStateAsUpdate(a, Y.encodeStateVector(b)))
}
checkpoint()

const refCanonical = canonical(rootsJSON(ref))
for (const a of authors) {
  if (canonical(rootsJSON(a)) !== refCanonical) throw new Error('oracle bug: an author did not converge with the reference document')
}

// ---------------------------------------------------------------------------------------
// State vectors: checkpoints a quarter, half and three quarters through a, and random ones
// cutting through structs (a client left out, at its state, or at a random clock; sometimes
// a client the document does not know).

const finalSV = Y.decodeStateVector(Y.encodeStateVector(ref))
const svs = []
const cps = [Math.floor(streamA.length / 4), Math.floor(streamA.length / 2), Math.floor(3 * streamA.length / 4)]
for (const k of cps) svs.push(checkpointSVs[Math.max(0, k - 1)])
for (let n = 0; n < 4; n++) {
  const m = new Map()
  finalSV.forEach((clock, client) => {
    const r = rng.int(3)
    if (r === 1) m.set(client, clock)
    else if (r === 2) m.set(client, rng.int(clock + 1))
  })
  if (rng.chance(0.5)) m.set(rng.u32(), rng.int(10))
  svs.push(Y.encodeStateVector(m))
}

// ---------------------------------------------------------------------------------------
// Paths and their expectations

const apply = (gc, updates, v2, opts = {}) => {
  const doc = new Y.Doc({ gc })
  declareRoots(doc)
  const out = {}
  updates.forEach((u, i) => {
    if (v2) Y.applyUpdateV2(doc, u)
    else Y.applyUpdate(doc, u)
    if (opts.midAfter === i + 1) {
      out.mid = {
        after: i + 1,
        stateVector: expected(Y.encodeStateVector(doc)),
        state: expected(Y.encodeStateAsUpdate(doc)),
        pending: doc.store.pendingStructs !== null || doc.store.pendingDs !== null
      }
    }
  })
  const json = canonical(rootsJSON(doc))
  if (json !== refCanonical) throw new Error('oracle bug: a path did not converge with the reference document')
  out.expect = {
    json: put(new TextEncoder().encode(json)),
    stateVector: expected(Y.encodeStateVector(doc)),
    state: expected(Y.encodeStateAsUpdate(doc)),
    pending: doc.store.pendingStructs !== null || doc.store.pendingDs !== null
  }
  if (opts.diffs) out.expect.diffs = svs.map(sv => expected(Y.encodeStateAsUpdate(doc, sv)))
  return out
}

const n = streamA.length
const shuffled = rng.shuffle([...Array(n).keys()])
const shuffledV2 = rng.shuffle([...Array(n).keys()])
const reversed = [...Array(n).keys()].reverse()
const pick = (list, order) => order.map(i => list[i])

const merged = Y.mergeUpdates(streamA)
const mergedShuffled = Y.mergeUpdates(pick(streamA, shuffled))
const mergedV2 = Y.mergeUpdatesV2(streamAV2)
const prefix = cps[1] // a peer that holds the first half of a catches up with a diff
const prefixDiff = Y.diffUpdate(merged, svs[1])
const stateV1 = Y.encodeStateAsUpdate(ref)
const stateV2 = Y.encodeStateAsUpdateV2(ref)

const paths = []
for (const gc of [true, false]) {
  const path = (name, input, updates, v2, opts) => paths.push({ name, gc, input, ...apply(gc, updates, v2, opts) })
  path('a in order', { stream: 'a' }, streamA, false, { diffs: true })
  path('a shuffled', { stream: 'a', order: shuffled }, pick(streamA, shuffled), false, { diffs: true, midAfter: Math.floor(n / 2) })
  path('a reversed', { stream: 'a', order: reversed }, pick(streamA, reversed), false, { midAfter: Math.floor(n / 2) })
  path('mergeUpdates(a)', { merge: 'a' }, [merged], false)
  path('mergeUpdates(a shuffled)', { merge: 'a', order: shuffled }, [mergedShuffled], false)
  path('a prefix + diffUpdate(merged)', { stream: 'a', prefix, diff: 1 }, [...streamA.slice(0, prefix), prefixDiff], false)
  path('a v2 in order', { stream: 'aV2' }, streamAV2, true)
  path('a v2 shuffled', { stream: 'aV2', order: shuffledV2 }, pick(streamAV2, shuffledV2), true, { midAfter: Math.floor(n / 2) })
  path('mergeUpdatesV2(a v2)', { blob: put(mergedV2), v2: true }, [mergedV2], true)
  path('state v1', { blob: put(stateV1) }, [stateV1], false, { diffs: true })
  path('state v2', { blob: put(stateV2), v2: true }, [stateV2], true)
  path('b in order', { stream: 'b' }, streamB, false, { diffs: true })
  // (b v2 with GC on only: a JS apply of every transaction costs as much as all of a)
  if (gc) path('b v2 in order', { stream: 'bV2' }, streamBV2, true)
}

// ---------------------------------------------------------------------------------------
// Figures for the test log

let structs = 0
const perClient = {}
ref.store.clients.forEach((list, client) => {
  structs += list.length
  perClient[client] = list.length
})

const manifest = {
  config: { seed, mib: targetBytes / 1048576, authors: nAuthors, updates: nUpdates, refGC },
  yjs: JSON.parse(readFileSync(new URL('./node_modules/yjs/package.json', import.meta.url), 'utf8')).version,
  authors: authors.map(a => a.clientID),
  roots: ROOTS,
  figures: {
    rounds,
    stateBytes: stateV1.byteLength,
    textLength: ref.getText('text').length,
    richLength: ref.getText('rich').length,
    mapKeys: ref.getMap('map').size,
    listLength: ref.getArray('list').length,
    structs,
    structsPerClient: perClient,
    streamA: streamA.length,
    streamABytes: streamA.reduce((s, u) => s + u.byteLength, 0),
    streamAMaxBytes: Math.max(...streamA.map(u => u.byteLength)),
    streamB: streamB.length,
    streamBBytes
  },
  streams: { a: putList(streamA), aV2: putList(streamAV2), b: putList(streamB), bV2: putList(streamBV2) },
  stateVectors: svs.map(put),
  merged: expected(merged),
  mergedShuffled: expected(mergedShuffled),
  diffs: svs.map(sv => expected(Y.diffUpdate(merged, sv))),
  svFromMerged: expected(Y.encodeStateVectorFromUpdate(merged)),
  v2ToV1: streamAV2.map(u => expected(Y.convertUpdateFormatV2ToV1(u))),
  paths
}
if (streamBV2.length !== streamB.length) throw new Error('oracle bug: a transaction lacks its v2 update')
writeFileSync(join(tmpDir, 'manifest.json'), JSON.stringify(manifest, null, 1))
renameSync(tmpDir, outDir)
console.error(`largehist: ${JSON.stringify(manifest.figures)}`)
