// Golden Hocuspocus frames for yws/hocuspocus/testdata/frames.json, produced by the real
// packages, never by the Go code under test:
//
//   - "client": what the real HocuspocusProvider (3.x from ./v3, 4.x from ./v4) sends over a
//     socket it believes open, step by step: authentication, sync, awareness, an edit, a
//     stateless message, a token sent again, a Pong, the CLOSE of a document. Each frame
//     comes with what it must decode to, as this script knows it from the provider's inputs
//     (the token, the Yjs update the edit made, the awareness update y-protocols encodes…).
//   - "server": frames @hocuspocus/server's encoder (OutgoingMessage, in ./v4) writes, each
//     with what the real 4.x provider did when it read it (authenticated scope, synced,
//     unsynced changes, a stateless payload, a close reason).
//
// Usage: node golden.mjs > ../../yws/hocuspocus/testdata/frames.json (make golden). The
// output is deterministic: fixed Yjs client ids and session ids, no clock.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const hex = (u8) => Buffer.from(u8).toString('hex')
const tick = () => new Promise((resolve) => setTimeout(resolve, 0))

// FakeSocket is the WebSocket the provider is given: it records what the provider sends
// and lets the script open it and deliver frames to it.
class FakeSocket {
  static last = null
  constructor (url) {
    this.url = url
    this.readyState = 0
    this.sent = []
    this.listeners = {}
    FakeSocket.last = this
  }

  addEventListener (name, fn) { (this.listeners[name] ??= []).push(fn) }
  removeEventListener (name, fn) { this.listeners[name] = (this.listeners[name] ?? []).filter((f) => f !== fn) }
  emit (name, ev) { for (const fn of this.listeners[name] ?? []) fn(ev) }
  send (data) { this.sent.push(new Uint8Array(data)) }
  close () { this.readyState = 3 }
  open () { this.readyState = 1; this.emit('open', {}) }
  deliver (u8) { this.emit('message', { data: u8.buffer.slice(u8.byteOffset, u8.byteOffset + u8.byteLength) }) }
  take () { const out = this.sent; this.sent = []; return out }
}

function newDoc (deps, clientID) {
  const doc = new deps.Y.Doc()
  doc.clientID = clientID
  return doc
}

const NS_A = 'ns-0123456789abcdef0123456789abcdef'
const NS_B = 'ns-fedcba9876543210fedcba9876543210'

// clientFrames drives the provider of one version through a session and returns its frames.
async function clientFrames (dir) {
  const deps = await import(`./${dir}/deps.mjs`)
  const pkg = JSON.parse(readFileSync(new URL(`./${dir}/node_modules/@hocuspocus/provider/package.json`, import.meta.url)))
  const v4 = pkg.version.startsWith('4.')
  const out = []
  const record = (name, frames, expect) => {
    if (frames.length !== expect.length) {
      throw new Error(`${dir} ${name}: the provider sent ${frames.length} frames, expected ${expect.length}: ${frames.map(hex).join(' ')}`)
    }
    frames.forEach((f, i) => out.push({ name: `${name}-${i + 1}`, provider: pkg.version, hex: hex(f), ...expect[i] }))
  }

  const socket = new deps.HocuspocusProviderWebsocket({ url: 'ws://node.example/v1/hocuspocus', WebSocketPolyfill: FakeSocket })
  const fake = FakeSocket.last
  const docA = newDoc(deps, 1001)
  docA.getText('body').insert(0, 'offline ')
  const a = new deps.HocuspocusProvider({ name: NS_A, document: docA, token: 'token-a', websocketProvider: socket })
  a.attach()
  const docB = newDoc(deps, 1002)
  const optsB = { name: NS_B, document: docB, token: () => 'token-b', websocketProvider: socket }
  if (v4) optsB.sessionAwareness = true
  const b = new deps.HocuspocusProvider(optsB)
  b.sessionId = 'golden1'
  b.attach()
  const addrB = v4 ? NS_B + '\0golden1' : NS_B

  fake.open()
  await tick()
  await tick()
  const version = v4 ? pkg.version : ''
  const awarenessOf = (p, doc) => hex(deps.awarenessProtocol.encodeAwarenessUpdate(p.awareness, [doc.clientID]))
  const opened = fake.take()
  // The providers open in attach order, each sending its token, its SyncStep1 and its own
  // awareness state.
  record('open', opened, [
    { address: NS_A, type: 'auth', token: 'token-a', version },
    { address: NS_A, type: 'sync-step1', payload: hex(deps.Y.encodeStateVector(docA)) },
    { address: NS_A, type: 'awareness', payload: awarenessOf(a, docA) },
    { address: addrB, type: 'auth', token: 'token-b', version },
    { address: addrB, type: 'sync-step1', payload: hex(deps.Y.encodeStateVector(docB)) },
    { address: addrB, type: 'awareness', payload: awarenessOf(b, docB) }
  ])

  // The node's SyncStep1 (an empty document's state vector): the provider answers with its
  // SyncStep2, the offline text.
  const serverDoc = newDoc(deps, 9)
  const enc = deps.encoding.createEncoder()
  deps.encoding.writeVarString(enc, NS_A)
  deps.encoding.writeVarUint(enc, 0)
  deps.syncProtocol.writeSyncStep1(enc, serverDoc)
  fake.deliver(deps.encoding.toUint8Array(enc))
  record('sync-step2', fake.take(), [
    { address: NS_A, type: 'sync-step2', payload: hex(deps.Y.encodeStateAsUpdate(docA, deps.Y.encodeStateVector(serverDoc))) }
  ])

  // An edit: one Update frame carrying the update the edit made.
  let update = null
  docB.once('update', (u) => { update = u })
  docB.getText('body').insert(0, 'typed')
  record('update', fake.take(), [{ address: addrB, type: 'update', payload: hex(update) }])

  // A stateless message, and the token sent again (a refresh).
  b.sendStateless('{"event":"golden"}')
  record('stateless', fake.take(), [{ address: addrB, type: 'stateless', stateless: '{"event":"golden"}' }])
  a.configuration.token = 'token-a-fresh'
  await a.sendToken()
  record('token-again', fake.take(), [{ address: NS_A, type: 'auth', token: 'token-a-fresh', version }])

  if (v4) {
    fake.deliver(new Uint8Array([9]))
    record('pong', fake.take(), [{ type: 'pong' }])
  }

  // Destroying a provider removes its awareness state (an update with a null state, clock
  // + 1) and closes its document.
  const removal = deps.encoding.createEncoder()
  deps.encoding.writeVarUint(removal, 1)
  deps.encoding.writeVarUint(removal, docA.clientID)
  deps.encoding.writeVarUint(removal, a.awareness.meta.get(docA.clientID).clock + 1)
  deps.encoding.writeVarString(removal, 'null')
  a.destroy()
  record('destroy', fake.take(), [
    { address: NS_A, type: 'awareness', payload: hex(deps.encoding.toUint8Array(removal)) },
    { address: NS_A, type: 'close' }
  ])
  b.destroy()
  socket.destroy()
  return out
}

// serverFrames encodes frames with @hocuspocus/server's OutgoingMessage and records what
// the real 4.x provider makes of each.
async function serverFrames () {
  const deps = await import('./v4/deps.mjs')
  const { OutgoingMessage, Y } = deps
  const out = []
  const socket = new deps.HocuspocusProviderWebsocket({ url: 'ws://node.example/v1/hocuspocus', WebSocketPolyfill: FakeSocket })
  const fake = FakeSocket.last
  const doc = newDoc(deps, 2001)
  const seen = { stateless: [], closes: [], denied: [] }
  const p = new deps.HocuspocusProvider({
    name: NS_A,
    document: doc,
    token: 'token',
    websocketProvider: socket,
    onStateless: ({ payload }) => seen.stateless.push(payload),
    onClose: ({ event }) => seen.closes.push(event.reason),
    onAuthenticationFailed: ({ reason }) => seen.denied.push(reason)
  })
  p.attach()
  fake.open()
  await tick()
  await tick()
  fake.take()
  const state = () => ({
    authenticated: p.isAuthenticated,
    scope: p.authorizedScope ?? '',
    synced: p.synced,
    unsyncedChanges: p.unsyncedChanges,
    text: doc.getText('body').toString()
  })
  const frame = async (name, fields, u8) => {
    fake.deliver(u8)
    await tick()
    const replies = fake.take().map(hex)
    out.push({ name, hex: hex(u8), ...fields, replies, after: { ...state(), stateless: [...seen.stateless], closes: [...seen.closes], denied: [...seen.denied] } })
  }

  await frame('authenticated-readonly', { address: NS_A, type: 'authenticated', scope: 'readonly' },
    new OutgoingMessage(NS_A).writeAuthenticated(true).toUint8Array())
  await frame('authenticated-read-write', { address: NS_A, type: 'authenticated', scope: 'read-write' },
    new OutgoingMessage(NS_A).writeAuthenticated(false).toUint8Array())

  // The node's document has a text; its SyncStep1 and its SyncStep2 (the whole document,
  // for an empty state vector).
  const nodeDoc = newDoc(deps, 3001)
  nodeDoc.getText('body').insert(0, 'from the node')
  await frame('sync-step1', { address: NS_A, type: 'sync-step1', payload: hex(Y.encodeStateVector(nodeDoc)) },
    new OutgoingMessage(NS_A).createSyncMessage().writeFirstSyncStepFor(nodeDoc).toUint8Array())
  const step2 = new OutgoingMessage(NS_A).createSyncMessage()
  const diff = Y.encodeStateAsUpdate(nodeDoc, Y.encodeStateVector(doc))
  deps.syncProtocol.writeSyncStep2(step2.encoder, nodeDoc, Y.encodeStateVector(doc))
  await frame('sync-step2', { address: NS_A, type: 'sync-step2', payload: hex(diff) }, step2.toUint8Array())
  await frame('sync-status-saved', { address: NS_A, type: 'sync-status', saved: true },
    new OutgoingMessage(NS_A).writeSyncStatus(true).toUint8Array())

  let update = null
  nodeDoc.once('update', (u) => { update = u })
  nodeDoc.getText('body').insert(0, 'more ')
  await frame('update', { address: NS_A, type: 'update', payload: hex(update) },
    new OutgoingMessage(NS_A).createSyncMessage().writeUpdate(update).toUint8Array())

  doc.getText('body').insert(0, '!') // one unsynced change, which a SyncStatus 0 leaves
  fake.take()
  await frame('sync-status-not-saved', { address: NS_A, type: 'sync-status', saved: false },
    new OutgoingMessage(NS_A).writeSyncStatus(false).toUint8Array())

  const aw = new deps.awarenessProtocol.Awareness(nodeDoc)
  aw.setLocalState({ user: { name: 'node' } })
  await frame('awareness', { address: NS_A, type: 'awareness', payload: hex(deps.awarenessProtocol.encodeAwarenessUpdate(aw, [nodeDoc.clientID])) },
    new OutgoingMessage(NS_A).createAwarenessUpdateMessage(aw).toUint8Array())
  aw.destroy()
  await frame('stateless', { address: NS_A, type: 'stateless', stateless: '{"from":"node"}' },
    new OutgoingMessage(NS_A).writeStateless('{"from":"node"}').toUint8Array())
  await frame('token-request', { address: NS_A, type: 'token-request' },
    new OutgoingMessage(NS_A).writeTokenSyncRequest().toUint8Array())
  await frame('permission-denied', { address: NS_A, type: 'permission-denied', reason: 'Forbidden' },
    new OutgoingMessage(NS_A).writePermissionDenied('Forbidden').toUint8Array())
  await frame('close', { address: NS_A, type: 'close', reason: 'Unauthorized' },
    new OutgoingMessage(NS_A).writeCloseMessage('Unauthorized').toUint8Array())
  p.destroy()
  socket.destroy()
  return out
}

// Each part runs in a process of its own (node golden.mjs PART), so that each loads one
// copy of yjs.
const part = process.argv[2]
if (part === 'v3' || part === 'v4') {
  process.stdout.write(JSON.stringify(await clientFrames(part)))
} else if (part === 'server') {
  process.stdout.write(JSON.stringify(await serverFrames()))
} else {
  const run = (p) => JSON.parse(execFileSync(process.execPath, [fileURLToPath(import.meta.url), p], { encoding: 'utf8' }))
  const version = (dir, name) => JSON.parse(readFileSync(new URL(`./${dir}/node_modules/${name}/package.json`, import.meta.url))).version
  const golden = {
    generator: 'e2e/hocuspocus/golden.mjs',
    provider: { v3: version('v3', '@hocuspocus/provider'), v4: version('v4', '@hocuspocus/provider') },
    server: version('v4', '@hocuspocus/server'),
    client: [...run('v3'), ...run('v4')],
    server_frames: run('server')
  }
  process.stdout.write(JSON.stringify(golden, null, 1) + '\n')
}
// The providers' reconnect timers and intervals are gone with socket.destroy(); exit anyway.
process.exit(0)
