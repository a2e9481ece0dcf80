// Generates yjs/testdata/vectors.json with the JavaScript yjs reference (the pinned version
// installed under testdata/oracle by `npm ci`): local edit scripts with the update of every
// transaction, remote histories applied in given orders, merge/diff/state-vector results,
// and v2 updates with JS's conversion of each to v1. The Go tests replay the same scripts
// and must produce the same bytes.
//
//   node yjs/testdata/gen/gen.mjs   (from the repository root)
import { writeFileSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import * as Y from '../../../testdata/oracle/node_modules/yjs/dist/yjs.mjs'

const here = (p) => fileURLToPath(new URL(p, import.meta.url))
const version = JSON.parse(readFileSync(here('../../../testdata/oracle/node_modules/yjs/package.json'), 'utf8')).version
const hex = (u8) => Buffer.from(u8).toString('hex')
const unhex = (s) => new Uint8Array(Buffer.from(s, 'hex'))

// Values of the scripts: JSON, with {"$map": {...}}, {"$array": [...]}, {"$text": "..."},
// {"$bytes": "hex"} for nested types and binary.
const value = (v) => {
  if (v === null || typeof v !== 'object') return v
  if (Array.isArray(v)) return v.map(value)
  if ('$map' in v) { const m = new Y.Map(); for (const [k, x] of Object.entries(v.$map)) m.set(k, value(x)); return m }
  if ('$array' in v) return Y.Array.from(v.$array.map(value))
  if ('$text' in v) return new Y.Text(v.$text)
  if ('$bytes' in v) return unhex(v.$bytes)
  const o = {}
  for (const [k, x] of Object.entries(v)) o[k] = value(x)
  return o
}

const run = (doc, op) => {
  const [kind, root, ...a] = op
  switch (kind) {
    case 'tx': doc.transact(() => root.forEach(o => run(doc, o))); return
    case 'insert': doc.getText(root).insert(a[0], a[1], a[2] ?? undefined); return
    case 'delete': doc.getText(root).delete(a[0], a[1]); return
    case 'format': doc.getText(root).format(a[0], a[1], a[2]); return
    case 'embed': doc.getText(root).insertEmbed(a[0], a[1], a[2] ?? undefined); return
    case 'set': doc.getMap(root).set(a[0], value(a[1])); return
    case 'mdel': doc.getMap(root).delete(a[0]); return
    case 'ains': doc.getArray(root).insert(a[0], a[1].map(value)); return
    case 'apush': doc.getArray(root).push(a[0].map(value)); return
    case 'adel': doc.getArray(root).delete(a[0], a[1]); return
  }
  throw new Error('unknown op ' + kind)
}

// JSON rules of the project: Uint8Array → {"$bytes": hex}, bigint → {"$bigint": "n"},
// subdocument → {"$doc": guid}, undefined → {"$undefined": true}, non-finite numbers →
// {"$number": "NaN"|"Infinity"|"-Infinity"}, -0 → 0.
const normalize = (v) => {
  if (v === undefined) return { $undefined: true }
  if (v === null) return null
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return { $number: 'NaN' }
    if (v === Infinity) return { $number: 'Infinity' }
    if (v === -Infinity) return { $number: '-Infinity' }
    return Object.is(v, -0) ? 0 : v
  }
  if (typeof v === 'bigint') return { $bigint: v.toString() }
  if (typeof v !== 'object') return v
  if (v instanceof Uint8Array) return { $bytes: hex(v) }
  if (v instanceof Y.Doc) return { $doc: v.guid }
  if (v instanceof Y.AbstractType) return normalize(v.toJSON())
  if (Array.isArray(v)) return v.map(normalize)
  const o = {}
  for (const k of Object.keys(v)) o[k] = normalize(v[k])
  return o
}

const rootsJSON = (doc, roots) => {
  const out = {}
  for (const [name, kind] of Object.entries(roots)) {
    const t = kind === 'text' ? doc.getText(name) : kind === 'map' ? doc.getMap(name) : kind === 'array' ? doc.getArray(name) : doc.getXmlFragment(name)
    out[name] = kind === 'xml' ? t.toString() : normalize(t.toJSON())
  }
  return out
}

const defineRoots = (doc, roots) => rootsJSON(doc, roots)

// ---- update format v2: every local transaction's 'updateV2' and the v2 state of every
// script and history, each with JS's convertUpdateFormatV2ToV1 of it
const v2 = []
const addV2 = (name, u) => v2.push({ name, update: hex(u), v1: hex(Y.convertUpdateFormatV2ToV1(u)) })

// ---- local scripts
const local = []
const addLocal = (name, client, roots, script, gc = true) => {
  const doc = new Y.Doc({ gc })
  doc.clientID = client
  defineRoots(doc, roots)
  const updates = []
  doc.on('update', u => updates.push(hex(u)))
  doc.on('updateV2', u => { if (updates.length <= 24) addV2(`${name}: update ${updates.length - 1}`, u) })
  for (const op of script) run(doc, structuredClone(op)) // JS may add keys to attribute objects
  addV2(`${name}: state`, Y.encodeStateAsUpdateV2(doc))
  local.push({ name, client, gc, roots, script, updates, state: hex(Y.encodeStateAsUpdate(doc)), stateVector: hex(Y.encodeStateVector(doc)), json: rootsJSON(doc, roots) })
}

addLocal('text typing and deleting', 7, { text: 'text' }, [
  ['insert', 'text', 0, 'hello'], ['insert', 'text', 5, ' world'], ['delete', 'text', 0, 1], ['insert', 'text', 2, 'XY'],
  ['delete', 'text', 3, 4], ['insert', 'text', 0, 'A'], ['insert', 'text', 1, 'B'], ['insert', 'text', 10, '!']])
addLocal('text without gc', 8, { text: 'text' }, [
  ['insert', 'text', 0, 'abcdef'], ['delete', 'text', 1, 2], ['insert', 'text', 1, 'Z'], ['delete', 'text', 0, 3]], false)
addLocal('text with surrogate pairs', 9, { text: 'text' }, [
  ['insert', 'text', 0, 'a😀b日本'], ['insert', 'text', 3, 'x'], ['delete', 'text', 0, 1], ['insert', 'text', 6, '𝄞'], ['delete', 'text', 1, 2]])
addLocal('text formatting', 10, { text: 'text' }, [
  ['insert', 'text', 0, 'hello world'], ['format', 'text', 0, 5, { bold: true }], ['insert', 'text', 5, '!!'],
  ['insert', 'text', 2, 'ZZ', { italic: true }], ['format', 'text', 3, 6, { bold: null, color: '#f00' }],
  ['embed', 'text', 4, { image: 'x.png' }], ['delete', 'text', 1, 5], ['insert', 'text', 0, 'S', { bold: true }]])
addLocal('map values', 11, { map: 'map' }, [
  ['set', 'map', 'a', 1], ['set', 'map', 'b', { x: [1, 2.5, 'z'], y: null, '1': true }], ['set', 'map', 'a', 'two'],
  ['set', 'map', 'big', 2 ** 40], ['set', 'map', 'neg', -7], ['set', 'map', 'f', 0.1], ['set', 'map', 'bin', { $bytes: '00ff10' }],
  ['mdel', 'map', 'b'], ['set', 'map', '', 'empty key'], ['set', 'map', 'nested', { $map: { k: 'v', arr: { $array: [1, 2] } } }],
  ['tx', [['set', 'map', 'x', 1], ['set', 'map', 'x', 2], ['mdel', 'map', 'a']]]])
addLocal('array operations', 12, { array: 'array' }, [
  ['ains', 'array', 0, [1, 2, 3]], ['apush', 'array', [{ $map: {} }, 'four']], ['adel', 'array', 1, 1],
  ['ains', 'array', 2, ['a', 'b', { $bytes: '01' }, 'c']], ['adel', 'array', 0, 3], ['ains', 'array', 0, [{ $text: 'hi' }]],
  ['apush', 'array', [[1, [2]], { o: 1 }]], ['adel', 'array', 2, 3], ['ains', 'array', 1, [true, false, null]]])
addLocal('nested types deleted and collected', 13, { map: 'map', array: 'array' }, [
  ['set', 'map', 'child', { $map: { a: 1, b: { $array: [1, 2, 3] } } }], ['set', 'map', 'child', 'replaced'],
  ['ains', 'array', 0, [{ $array: [{ $text: 'deep' }] }, 5]], ['adel', 'array', 0, 1]])

// Random local scripts: positions chosen on the JS document as it evolves (never inside a
// surrogate pair), recorded as ops the Go test replays.
const rng = (seed) => { let x = seed >>> 0; return (n) => { x = (Math.imul(x, 1664525) + 1013904223) >>> 0; return x % n } }
const CHARS = ['a', 'b', 'c', ' ', 'é', '日', '😀', '\n']
const FORMATS = [{ bold: true }, { italic: true }, { bold: null }, { color: '#0f0' }, { bold: true, italic: true }, { link: { href: 'x' } }]
const randomTextScript = (seed, n) => {
  const r = rng(seed)
  const doc = new Y.Doc(); doc.clientID = 1; const t = doc.getText('text')
  const units = () => t.toDelta().map(d => typeof d.insert === 'string' ? d.insert : '\uFFFC').join('')
  const safe = (s, p) => { while (p > 0 && p < s.length && /[\uD800-\uDBFF]/.test(s[p - 1])) p--; return p }
  const script = []
  for (let i = 0; i < n; i++) {
    const s = units()
    const k = r(10)
    let op
    if (s.length > 0 && k < 3) {
      const p = safe(s, r(s.length)); let len = Math.min(s.length - p, 1 + r(5))
      while (p + len < s.length && /[\uD800-\uDBFF]/.test(s[p + len - 1])) len++
      op = ['delete', 'text', p, len]
    } else if (s.length > 0 && k < 5) {
      const p = safe(s, r(s.length)); let len = Math.min(s.length - p, 1 + r(6))
      while (p + len < s.length && /[\uD800-\uDBFF]/.test(s[p + len - 1])) len++
      op = ['format', 'text', p, len, FORMATS[r(FORMATS.length)]]
    } else if (k < 6) {
      op = ['embed', 'text', safe(s, r(s.length + 1)), { img: 'i' + r(9) }]
    } else {
      let str = ''
      for (let j = 1 + r(4); j > 0; j--) str += CHARS[r(CHARS.length)]
      op = ['insert', 'text', safe(s, r(s.length + 1)), str]
      if (r(3) === 0) op.push(FORMATS[r(FORMATS.length)])
    }
    script.push(op)
    run(doc, structuredClone(op))
  }
  return script
}
for (const seed of [1, 2, 3]) addLocal(`random text script ${seed}`, 21, { text: 'text' }, randomTextScript(seed, 250))

const VALUES = [1, -2.5, 'str', '日本😀', true, null, [1, 'a', [2]], { k: 'v', n: { m: 1 } }, { $bytes: '0102' }, 2 ** 40,
  { $map: { x: 1 } }, { $array: [1, 2] }, { $text: 'nested' }]
const randomListScript = (seed, n) => {
  const r = rng(seed)
  const doc = new Y.Doc(); doc.clientID = 1
  const a = doc.getArray('array'); const m = doc.getMap('map')
  const script = []
  for (let i = 0; i < n; i++) {
    const k = r(10)
    const vals = () => Array.from({ length: 1 + r(3) }, () => VALUES[r(VALUES.length)])
    let op
    if (k < 3 && a.length > 0) { const p = r(a.length); op = ['adel', 'array', p, Math.min(a.length - p, 1 + r(3))] }
    else if (k < 5) op = ['ains', 'array', r(a.length + 1), vals()]
    else if (k < 6) op = ['apush', 'array', vals()]
    else if (k < 8) op = ['set', 'map', ['a', 'b', 'c', 'd'][r(4)], VALUES[r(VALUES.length)]]
    else op = ['mdel', 'map', ['a', 'b', 'c', 'd'][r(4)]]
    if (r(6) === 0) { op = ['tx', [op, ['apush', 'array', vals()]]] }
    script.push(op)
    run(doc, structuredClone(op))
  }
  return script
}
for (const seed of [4, 5]) addLocal(`random array and map script ${seed}`, 22, { array: 'array', map: 'map' }, randomListScript(seed, 300))

// v2 written by JS's own converters: legacy JSON content (a v1 update written here, with
// a non-canonical number), and a Skip struct (mergeUpdatesV2 of non-adjacent updates)
addV2('legacy JSON content', Y.convertUpdateFormatV1ToV2(unhex('0101070002010361727204' +
  hex(new TextEncoder().encode('\x07{"a":1}\x09undefined\x08[1,2.50]\x03"s"')) + '00')))
{
  const ups = local[0].updates.map(u => Y.convertUpdateFormatV1ToV2(unhex(u)))
  addV2('merged with a gap (Skip)', Y.mergeUpdatesV2([ups[0], ups[3], ups[5]]))
}

// ---- remote histories: several clients; a receiver applies the updates in the listed order
const remote = []
const addRemote = (name, roots, clients, script, order, gc = true) => {
  const docs = clients.map(id => { const d = new Y.Doc({ gc }); d.clientID = id; defineRoots(d, roots); return d })
  const updates = []
  docs.forEach((d, i) => d.on('update', (u, origin) => { if (origin !== 'sync') updates.push({ client: i, update: hex(u) }) }))
  for (const step of script) {
    if (step[0] === 'sync') { // sync a into b
      const [, a, b] = step
      Y.applyUpdate(docs[b], Y.encodeStateAsUpdate(docs[a], Y.encodeStateVector(docs[b])), 'sync')
    } else {
      run(docs[step[0]], structuredClone(step[1]))
    }
  }
  const recv = new Y.Doc({ gc })
  recv.clientID = 999
  defineRoots(recv, roots)
  const seq = (order ?? updates.map((_, i) => i))
  const after = []
  for (const i of seq) {
    Y.applyUpdate(recv, unhex(updates[i].update))
    after.push({ pending: recv.store.pendingStructs !== null || recv.store.pendingDs !== null, stateVector: hex(Y.encodeStateVector(recv)) })
  }
  addV2(`${name}: state`, Y.encodeStateAsUpdateV2(recv))
  const sv1 = hex(Y.encodeStateVector(docs[0]))
  remote.push({ name, gc, roots, updates: updates.map(u => u.update), order: seq, after,
    state: hex(Y.encodeStateAsUpdate(recv)), stateVector: hex(Y.encodeStateVector(recv)), json: rootsJSON(recv, roots),
    diffAgainst: sv1, diff: hex(Y.encodeStateAsUpdate(recv, unhex(sv1))) })
}

addRemote('concurrent text inserts at one position', { text: 'text' }, [1, 2, 3], [
  [0, ['insert', 'text', 0, 'base']], ['sync', 0, 1], ['sync', 0, 2],
  [0, ['insert', 'text', 2, 'AA']], [1, ['insert', 'text', 2, 'BB']], [2, ['insert', 'text', 2, 'CC']],
  [1, ['delete', 'text', 0, 1]], ['sync', 1, 2], [2, ['insert', 'text', 3, 'D']]])
addRemote('out of order delivery', { text: 'text', map: 'map' }, [5, 6], [
  [0, ['insert', 'text', 0, 'abc']], ['sync', 0, 1], [1, ['insert', 'text', 1, 'X']], [0, ['insert', 'text', 3, 'Y']],
  [1, ['delete', 'text', 0, 2]], [0, ['set', 'map', 'k', 1]], [1, ['set', 'map', 'k', 2]], [0, ['delete', 'text', 2, 1]]],
  [5, 4, 3, 2, 1, 0, 6])
addRemote('map conflicts', { map: 'map' }, [40, 30, 20], [
  [0, ['set', 'map', 'k', 'from 40']], [1, ['set', 'map', 'k', 'from 30']], [2, ['set', 'map', 'k', { $map: { n: 1 } }]],
  ['sync', 0, 1], [1, ['mdel', 'map', 'k']], [2, ['set', 'map', 'j', [1, 2]]]])
addRemote('array interleaving and deletions without gc', { array: 'array' }, [100, 200], [
  [0, ['ains', 'array', 0, [1, 2, 3, 4]]], ['sync', 0, 1], [0, ['ains', 'array', 2, ['a', 'b']]], [1, ['ains', 'array', 2, ['x']]],
  [1, ['adel', 'array', 0, 3]], [0, ['adel', 'array', 3, 2]], ['sync', 1, 0], [0, ['apush', 'array', [{ $array: [9] }]]]], null, false)
addRemote('deletions before their structs', { text: 'text' }, [50, 51], [
  [0, ['insert', 'text', 0, 'hello']], ['sync', 0, 1], [1, ['delete', 'text', 1, 3]], [0, ['insert', 'text', 5, '!']]],
  [1, 0, 2])
addRemote('formatting from two clients', { text: 'text' }, [60, 61], [
  [0, ['insert', 'text', 0, 'formatted text']], ['sync', 0, 1], [0, ['format', 'text', 0, 9, { bold: true }]],
  [1, ['format', 'text', 5, 8, { bold: true }]], [1, ['insert', 'text', 3, 'ins', { italic: true }]], [0, ['delete', 'text', 2, 4]]])

// ---- update functions
const fns = []
for (const r of remote) {
  const ups = r.updates.map(unhex)
  fns.push({ name: r.name, updates: r.updates, merged: hex(Y.mergeUpdates(ups)),
    svFromMerged: hex(Y.encodeStateVectorFromUpdate(Y.mergeUpdates(ups))),
    svFromEach: ups.map(u => hex(Y.encodeStateVectorFromUpdate(u))),
    diffSV: r.diffAgainst, diffOfMerged: hex(Y.diffUpdate(Y.mergeUpdates(ups), unhex(r.diffAgainst))),
    mergedReversed: hex(Y.mergeUpdates([...ups].reverse())) })
}

writeFileSync(here('../vectors.json'), JSON.stringify({ generator: 'yjs/testdata/gen/gen.mjs', yjs: version, local, remote, updateFunctions: fns, v2 }, null, 1) + '\n')
console.log(`wrote ${local.length} local scripts, ${remote.length} remote histories, ${fns.length} update-function cases, ${v2.length} v2 updates (yjs ${version})`)
